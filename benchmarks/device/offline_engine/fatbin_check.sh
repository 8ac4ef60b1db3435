#!/usr/bin/env bash
# On an H200 host (no bundle needed, ~1 min): does the CUDA driver run libraries whose fat binaries fatbin.py
# blanked for every architecture but sm_90? Two checks, each against the untouched original:
#   1. a CUDA program nvcc builds here for sm_80, sm_90 and sm_100 (zstd-compressed fat binary, as torch's);
#   2. the host's own torch (2.11) copied to WORK and blanked: a spread of kernels (GEMMs, reductions, sort, scan,
#      indexing, normalisation, FP8 casts, conv through cuDNN) with CUDA_MODULE_LOADING=EAGER (every kernel of
#      every module loaded at start), results compared with the untouched torch's.
# Exit 0 and "fatbin_check: PASS" when both match: then FATBIN_SM90=1 bundles (build_bundle.sh) are safe to use.
#   usage: fatbin_check.sh [WORK]        (default /tmp/fatbin-check; run from the repository root)
set -euo pipefail
WORK=${1:-/tmp/fatbin-check}
PY=${PY:-python3}
rm -rf "$WORK" && mkdir -p "$WORK/site"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

cat >"$WORK/saxpy.cu" <<'EOF'
#include <cstdio>
__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  const int n = 1 << 20;
  float *x, *y;
  cudaMallocManaged(&x, n * sizeof(float));
  cudaMallocManaged(&y, n * sizeof(float));
  for (int i = 0; i < n; i++) { x[i] = 1.0f; y[i] = 2.0f; }
  saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
  cudaError_t err = cudaDeviceSynchronize();
  double sum = 0;
  for (int i = 0; i < n; i++) sum += y[i];
  printf("%s %.1f\n", cudaGetErrorString(err), sum);
  return err != cudaSuccess;
}
EOF
nvcc -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_100,code=sm_100 -o "$WORK/saxpy" "$WORK/saxpy.cu"
cp "$WORK/saxpy" "$WORK/saxpy.blank"
"$PY" -m benchmarks.device.offline_engine.fatbin "$WORK/saxpy.blank"
want=$("$WORK/saxpy") && got=$("$WORK/saxpy.blank")
echo "fatbin_check: program: original '$want', blanked '$got'"
[[ $want == "$got" ]] || { echo "fatbin_check: FAIL (program)"; exit 1; }

torch_dir=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
cp -a "$torch_dir" "$WORK/site/torch"
"$PY" -m benchmarks.device.offline_engine.fatbin "$WORK/site/torch/lib/"*.so
cat >"$WORK/ops.py" <<'EOF'
import sys, torch
out = sys.argv[1]
torch.manual_seed(0)
d = "cuda"
a, b = torch.randn(512, 512, device=d), torch.randn(512, 512, device=d)
x = torch.randn(8, 3, 32, 32, device=d)
w = torch.randn(16, 3, 3, 3, device=d)
r = {
    "mm_bf16": (a.bfloat16() @ b.bfloat16()).float(), "mm_fp16": (a.half() @ b.half()).float(), "mm_fp32": a @ b,
    "softmax": a.softmax(-1), "sum": a.sum(0), "sort": a.sort(-1).values, "topk": a.topk(8, -1).values,
    "cumsum": a.cumsum(-1), "index": a[torch.arange(0, 512, 7, device=d)], "layer_norm":
    torch.nn.functional.layer_norm(a, (512,)), "fp8": a.to(torch.float8_e4m3fn).float(), "conv": torch.nn.functional.conv2d(x, w),
    "scatter": torch.zeros(512, device=d).scatter_add(0, torch.arange(512, device=d) % 64, a[0]),
    "gelu": torch.nn.functional.gelu(a), "argmax": a.argmax(-1).float(), "where": torch.where(a > 0, a, b),
}
torch.cuda.synchronize()
torch.save({k: v.cpu() for k, v in r.items()}, out)
print("torch", torch.__version__, torch.__file__, len(r), "ops")
EOF
CUDA_MODULE_LOADING=EAGER "$PY" "$WORK/ops.py" "$WORK/want.pt"
CUDA_MODULE_LOADING=EAGER PYTHONPATH=$WORK/site "$PY" "$WORK/ops.py" "$WORK/got.pt"
"$PY" - "$WORK" <<'EOF'
import sys, torch
want, got = (torch.load(f"{sys.argv[1]}/{n}.pt") for n in ("want", "got"))
bad = [k for k in want if not torch.equal(want[k], got[k])]
print("fatbin_check: torch ops differing:", bad or "none")
sys.exit(1 if bad else 0)
EOF
echo "fatbin_check: PASS"
