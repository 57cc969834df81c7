# Sourced by the scripts that run mock-sap (mock-sap-server.sh): makes sure the venv $SAP_VENV
# (default .venv-sap/ at the repository root, git-ignored; set MOCK_SAP_VENV to use another) has
# mock-sap $MOCK_SAP_VERSION from PyPI, installing it when missing. mock-sap is an independent
# SAP Gateway (OData V2) and S/4HANA (OData V4 RAP) endpoint, MIT, standard library only.
#
# Needs python3 with its venv module; fails (exit status 1, with a message) when they are missing.
# Expects the current directory to be the repository root.
MOCK_SAP_VERSION=0.22.0
SAP_VENV=${MOCK_SAP_VENV:-$(pwd)/.venv-sap}

# Tests start servers in parallel: the first makes the venv, the others wait for it. The lock is a
# file beside the venv (not in TMPDIR, which differs between processes of one run).
if command -v flock >/dev/null 2>&1; then
    exec 8>"$SAP_VENV.lock"
    flock 8
fi
if ! "$SAP_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mock-sap') != '$MOCK_SAP_VERSION')" 2>/dev/null; then
    if [ ! -x "$SAP_VENV/bin/pip" ]; then
        # None, or one left half-made by a process that was stopped: made again.
        rm -rf "$SAP_VENV"
        if ! command -v python3 >/dev/null 2>&1; then
            echo "mock-sap-venv: python3 is not installed (needed for the mock-sap venv $SAP_VENV)" >&2
            exit 1
        fi
        python3 -m venv "$SAP_VENV" || { rm -rf "$SAP_VENV"; echo "mock-sap-venv: 'python3 -m venv $SAP_VENV' failed (is python3-venv installed?)" >&2; exit 1; }
    fi
    "$SAP_VENV/bin/pip" install --quiet --disable-pip-version-check "mock-sap==$MOCK_SAP_VERSION" >&2 \
        || { echo "mock-sap-venv: 'pip install mock-sap==$MOCK_SAP_VERSION' failed" >&2; exit 1; }
fi
exec 8>&-
