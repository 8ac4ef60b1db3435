#!/usr/bin/env bash
# base stage, cuda flavour: Ubuntu 24.04's python3.12 and the CUDA compiler + headers that FlashInfer's JIT needs
# at run time (it compiles the kernels it does not ship prebuilt on first use). No NVIDIA driver: the container
# toolkit mounts the host's. cuda-driver-dev brings only the link-time stub libcuda.so that FlashInfer's modules
# link against (-lcuda), so the image build can compile them (docker/flashinfer_jit_cache.sh) where no driver
# exists. Never executed on the development or CI machines: NVIDIA's apt repository is not reachable there.
#   usage: install_system_cuda.sh VENV
set -euo pipefail

VENV=${1:?usage: install_system_cuda.sh VENV}
# The CUDA apt packages carry the toolkit's major-minor in their names (13.0 → 13-0).
CUDA_DASH=${CUDA_VERSION:?CUDA_VERSION is set by the nvidia/cuda base image}
CUDA_DASH=$(echo "$CUDA_DASH" | cut -d. -f1,2 | tr . -)

apt-get update
apt-get install -y --no-install-recommends \
    python3.12 python3.12-venv python3.12-dev \
    ca-certificates \
    "cuda-nvcc-${CUDA_DASH}" "cuda-cudart-dev-${CUDA_DASH}" "cuda-nvrtc-dev-${CUDA_DASH}" \
    "cuda-driver-dev-${CUDA_DASH}" \
    gcc g++ libnuma1
rm -rf /var/lib/apt/lists/*

bash "$(dirname "$0")/make_venv.sh" python3.12 "$VENV"
