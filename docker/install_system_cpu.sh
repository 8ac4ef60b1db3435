#!/usr/bin/env bash
# base stage, cpu flavour, on the locally made Debian 12 base (docker/cpu_base_image.sh): its python3 (3.11, the
# one Python the CPU engine's torch wheel is kept for here), libnuma, which the CPU engine loads, and g++ with the
# Python headers: the CPU engine compiles part of its sampling (logprobs) with torch inductor at the first request
# that needs it, even with --enforce-eager. Without g++ the engine dies there ("InvalidCxxCompiler: No working C++
# compiler found"), without python3-dev likewise ("fatal error: Python.h: No such file or directory").
#   usage: install_system_cpu.sh VENV
set -euo pipefail

VENV=${1:?usage: install_system_cpu.sh VENV}

apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-dev ca-certificates libnuma1 g++
rm -rf /var/lib/apt/lists/*

bash "$(dirname "$0")/make_venv.sh" python3 "$VENV"
