#!/usr/bin/env bash
# The image's Python environment, for either flavour: a venv (PEP 668 forbids pip into the system python) with a
# pinned pip, so both flavours resolve with the same pip.
#   usage: make_venv.sh PYTHON VENV
set -euo pipefail

PY=${1:?usage: make_venv.sh PYTHON VENV}
VENV=${2:?usage: make_venv.sh PYTHON VENV}

# shellcheck source=SCRIPTDIR/build_ca.sh
. "$(dirname "$0")/build_ca.sh"

"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --no-cache-dir --upgrade "pip==25.3"
"$VENV/bin/python" -m pip --version
