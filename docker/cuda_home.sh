#!/usr/bin/env bash
# Lay the CUDA 13 wheels (nvidia/cu13/ in site-packages: nvcc, nvvm, crt, cccl, cudart, nvrtc, cublas, ...) out as
# the CUDA_HOME that FlashInfer's JIT compiles and links against (flashinfer/jit/cpp_ext.py: $cuda_home/bin/nvcc,
# $cuda_home/include, -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda), at a fixed path LINK:
# - lib64 → lib, and the unversioned libcudart.so / libnvrtc.so the linker's -l options look for;
# - lib/stubs/libcuda.so, a link-time stand-in for the driver library (soname libcuda.so.1, no code): the image has
#   no driver, the NVIDIA container toolkit mounts the host's libcuda.so.1 at run time, and the loader takes that one
#   (the stub's file name is libcuda.so, so nothing that asks for libcuda.so.1 can load it).
#   usage: cuda_home.sh PYTHON LINK
set -euo pipefail

PY=${1:?usage: cuda_home.sh PYTHON LINK}
LINK=${2:?usage: cuda_home.sh PYTHON LINK}

CU=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13
[[ -x $CU/bin/nvcc ]] || { echo "cuda_home.sh: no nvcc in $CU (cuda-toolkit[nvcc] not installed?)" >&2; exit 1; }
ln -sfn lib "$CU/lib64"
ln -sf libcudart.so.13 "$CU/lib/libcudart.so"
ln -sf libnvrtc.so.13 "$CU/lib/libnvrtc.so"
mkdir -p "$CU/lib/stubs"
stub=$(mktemp -d)
echo 'void moe_serving_libcuda_stub(void) {}' >"$stub/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CU/lib/stubs/libcuda.so" "$stub/stub.c"
rm -rf "$stub"
ln -sfn "$CU" "$LINK"
"$LINK/bin/nvcc" --version | tail -2
