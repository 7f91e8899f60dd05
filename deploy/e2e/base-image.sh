#!/usr/bin/env bash
# Build the stand-in for python:3.12-slim from Debian packages, once: debootstrap a minimal
# bookworm with python3 and venv, strip docs and caches, `docker import` it. Reused while the tag
# exists. Usage: deploy/e2e/base-image.sh TAG
set -euo pipefail
TAG=${1:?usage: base-image.sh TAG}
SUITE=${CHATSEEK_BASE_SUITE:-bookworm}
MIRROR=${CHATSEEK_BASE_MIRROR:-http://deb.debian.org/debian}
if docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "base image $TAG is there; reusing it"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    else
        echo "debootstrap is missing and cannot be installed here (needs root + apt-get)" >&2
        exit 1
    fi
fi
ROOTFS=$(mktemp -d /var/tmp/chatseek-base.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
echo "building the stand-in base $TAG from Debian $SUITE (debootstrap, a few minutes)"
debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
chroot "$ROOTFS" apt-get clean
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/* "$ROOTFS"/usr/share/doc/* \
    "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/*.log \
    "$ROOTFS"/usr/share/locale/*
tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$TAG" >/dev/null
echo "built $TAG ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
