# Sourced by the scripts that run odatapy (crosscheck.sh, client-check.sh, odatapy-server.sh):
# makes sure the venv $VENV (default .venv-xcheck/ at the repository root, git-ignored; set
# CROSSCHECK_VENV to use another) has odatapy $ODATAPY_VERSION, installing it from PyPI when missing.
#
#   . scripts/odatapy-venv.sh            # odatapy
#   ODATAPY_EXTRA=client . scripts/odatapy-venv.sh   # odatapy[client] (odatapy and httpx)
#
# Needs python3 with its venv module; fails (exit status 1, with a message) when they are missing.
# Expects the current directory to be the repository root.
ODATAPY_VERSION=5.3.0
VENV=${CROSSCHECK_VENV:-$(pwd)/.venv-xcheck}

# Several processes may start at once (the Swift tests start servers in parallel): the first
# makes the venv, the others wait for it (flock, where util-linux has it).
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/odatapy-venv-$(printf %s "$VENV" | cksum | cut -d' ' -f1).lock"
    flock 9
fi
if [ ! -x "$VENV/bin/python" ]; then
    if ! command -v python3 >/dev/null 2>&1; then
        echo "odatapy-venv: python3 is not installed (needed for the odatapy venv $VENV)" >&2
        exit 1
    fi
    python3 -m venv "$VENV" || { rm -rf "$VENV"; echo "odatapy-venv: 'python3 -m venv $VENV' failed (is python3-venv installed?)" >&2; exit 1; }
fi
if [ -n "$ODATAPY_EXTRA" ]; then
    if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys, httpx; sys.exit(m.version('odatapy') != '$ODATAPY_VERSION')" 2>/dev/null; then
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "odatapy[$ODATAPY_EXTRA]==$ODATAPY_VERSION" >&2
    fi
elif ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('odatapy') != '$ODATAPY_VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "odatapy==$ODATAPY_VERSION" >&2
fi
# The lock is not passed on to what the caller runs next (a server that outlives this script).
exec 9>&-
