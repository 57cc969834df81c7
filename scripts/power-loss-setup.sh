#!/bin/sh
# Makes what the power-loss test needs (PowerLossTests, scripts/power-loss/lossyfs.py):
#   - fuse3 (fusermount3) and libfuse3-3 from Debian, when missing (apt-get, as root);
#   - the venv $POWER_LOSS_VENV (default .venv-power/ at the repository root, git-ignored) with
#     mfusepy $MFUSEPY_VERSION (ctypes bindings for libfuse 2 and 3).
# Prints the venv's python on standard output. Exit status 1, with a message, when FUSE cannot be
# had here (no /dev/fuse, not root and no fusermount3, no python3).
# Expects the current directory to be the repository root.
set -e
MFUSEPY_VERSION=3.1.1
VENV=${POWER_LOSS_VENV:-$(pwd)/.venv-power}

if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/power-loss-setup-$(printf %s "$VENV" | cksum | cut -d' ' -f1).lock"
    flock 9
fi
if [ ! -c /dev/fuse ]; then
    echo "power-loss-setup: /dev/fuse is missing: FUSE cannot run here" >&2
    exit 1
fi
if ! command -v fusermount3 >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libfuse3\.so\.3'; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get install -y -q fuse3 libfuse3-3 >/dev/null 2>&1) ||
            (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q fuse3 libfuse3-3 >/dev/null 2>&1) || {
            echo "power-loss-setup: 'apt-get install fuse3 libfuse3-3' failed" >&2
            exit 1
        }
    else
        echo "power-loss-setup: fuse3 and libfuse3-3 are missing (apt-get install fuse3 libfuse3-3, as root)" >&2
        exit 1
    fi
fi
if [ ! -x "$VENV/bin/python" ]; then
    command -v python3 >/dev/null 2>&1 || { echo "power-loss-setup: python3 is not installed" >&2; exit 1; }
    python3 -m venv "$VENV" || { rm -rf "$VENV"; echo "power-loss-setup: 'python3 -m venv $VENV' failed" >&2; exit 1; }
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mfusepy') != '$MFUSEPY_VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "mfusepy==$MFUSEPY_VERSION" >&2
fi
exec 9>&-
echo "$VENV/bin/python"
