#!/bin/sh
# Installs into the image's venv (/opt/chatseek) at exactly the versions of requirements/lock.txt,
# then checks that nothing else came in. Every Dockerfile runs it in its build stage:
#   pip-install.sh [--torch] ARG...   install (pip arguments: the package folders, extra names)
#   pip-install.sh --finish           drop the installers the service does not need at run time
#   --torch  first torch at its locked version, CPU build: from /wheels when a wheel there fits
#            this interpreter (the local wheel directory, bound from deploy/wheels), else from
#            $TORCH_INDEX_URL (the PyTorch CPU index).
# The host's CA bundle, when the build needs one to reach the package index, is the build secret
# `ca` (/run/secrets/ca). Neither the secret nor the wheels are copied into a layer.
set -eu
HERE=$(dirname "$0")
LOCK="$HERE/lock.txt"
VENV=/opt/chatseek
PIP="$VENV/bin/pip"
if [ -s /run/secrets/ca ]; then
    export PIP_CERT=/run/secrets/ca
fi
if [ "${1:-}" = "--finish" ]; then
    "$VENV/bin/python" "$HERE/check_pins.py" --finish "$LOCK"
    exit 0
fi
if [ "${1:-}" = "--torch" ]; then
    shift
    torch=$(grep -i '^torch==' "$LOCK")
    if [ -d /wheels ] && "$PIP" install --no-deps --no-index --find-links /wheels "$torch" 2>/dev/null; then
        echo "pip-install: $torch from the local wheel directory"
    else
        echo "pip-install: $torch from ${TORCH_INDEX_URL:?TORCH_INDEX_URL is unset}"
        "$PIP" install --no-deps --index-url "$TORCH_INDEX_URL" "$torch"
    fi
fi
if [ "$#" -gt 0 ]; then
    # torch alone (above) still lacks its dependencies: they come with the service that needs it.
    "$PIP" install --constraint "$LOCK" "$@"
    "$PIP" check
    "$VENV/bin/python" "$HERE/check_pins.py" "$LOCK"
fi
