#!/usr/bin/env bash
# system stage, both flavours, on the locally made Debian 12 base (docker/cpu_base_image.sh): its python3 (3.11),
# libnuma (the CPU engine loads it), and g++ with the Python headers. Every flavour needs the compiler:
# - cpu: the CPU engine compiles part of its sampling (logprobs) with torch inductor at the first request that needs
#   it, even with --enforce-eager ("InvalidCxxCompiler: No working C++ compiler found" without g++, "Python.h: No such
#   file or directory" without python3-dev);
# - cuda: Triton builds its CUDA launcher stubs with the host compiler and Python.h at the first kernel, and nvcc
#   (from the CUDA wheels, docker/cuda_home.sh) uses g++ as its host compiler for FlashInfer's modules.
# Nothing of CUDA comes from apt: the CUDA flavour's toolkit comes from the package registry's wheels.
#   usage: install_system.sh VENV
set -euo pipefail

VENV=${1:?usage: install_system.sh VENV}

apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-dev ca-certificates libnuma1 g++
rm -rf /var/lib/apt/lists/*

bash "$(dirname "$0")/make_venv.sh" python3 "$VENV"
