#!/usr/bin/env bash
# On the H200 device host, after the pieces arrived (README.md beside this file): check the pieces' sums, join them,
# unpack the engine to PREFIX/site and show which torch / Triton / vLLM / FlashInfer / transformers / NCCL
# PYTHONPATH=PREFIX/site gets. Prints the environment lines the host's commands need. Run again, it checks and
# says so (the bundle's sum is kept in PREFIX/site/.engine-bundle).
#   usage: host_install.sh PIECES_DIR [PREFIX]     (PREFIX default /root)
#   env:   PY (default python3: the host's, with torch 2.11), NO_IMPORT_CHECK=1 (sums and unpack only)
set -euo pipefail
PIECES=${1:?usage: host_install.sh PIECES_DIR [PREFIX]}
PREFIX=${2:-/root}
PY=${PY:-python3}
SITE=$PREFIX/site
NAME=engine.tar.xz
T0=$SECONDS
say() { printf '[host_install %3ds] %s\n' $((SECONDS - T0)) "$*"; }

[[ -f $PIECES/SHA256SUMS ]] || { echo "host_install: no $PIECES/SHA256SUMS (copy every .offline/pNN/* there)" >&2; exit 1; }
want=$(awk -v n="$NAME" '$2 == n {print $1}' "$PIECES/SHA256SUMS")
if [[ -f $SITE/.engine-bundle && $(cat "$SITE/.engine-bundle") == "$want" ]]; then
  say "already installed in $SITE (bundle $want)"
else
  # every piece the sums name must be here: a transfer that failed shows as a missing piece
  missing=()
  while read -r _ file; do
    [[ $file == "$NAME" || -f $PIECES/$file ]] || missing+=("$file")
  done <"$PIECES/SHA256SUMS"
  if ((${#missing[@]})); then
    echo "host_install: missing ${missing[*]} in $PIECES: a piece did not arrive" >&2
    exit 1
  fi
  say "checking the pieces' sums"
  (cd "$PIECES" && grep -v "  $NAME\$" SHA256SUMS | sha256sum -c --quiet -)
  say "joining $(grep -c "  $NAME.part" "$PIECES/SHA256SUMS") pieces"
  cat "$PIECES/$NAME".part[0-9][0-9] >"$PIECES/$NAME"
  (cd "$PIECES" && grep "  $NAME\$" SHA256SUMS | sha256sum -c --quiet -)
  say "unpacking to $SITE"
  rm -rf "$PREFIX/.site.partial" && mkdir -p "$PREFIX/.site.partial"
  xz -T0 -dc "$PIECES/$NAME" | tar -x -C "$PREFIX/.site.partial"
  rm -rf "$SITE" && mv "$PREFIX/.site.partial/site" "$SITE" && rmdir "$PREFIX/.site.partial"
  rm -f "$PIECES/$NAME" # the pieces stay; the joined copy is not needed again
  echo "$want" >"$SITE/.engine-bundle"
  say "unpacked: $(du -sh "$SITE" | cut -f1)"
fi

# FlashInfer's prebuilt modules, when their upload (.offline/moe90) is in PIECES: the CUTLASS fused-MoE module pruned to
# FP8 (build_fused_moe_90.sh), so auto rows start without a JIT build, and the sampler and autotuner modules
# (build_flashinfer_prebuilt.sh), so a run's preparation does not compile them. Each NAME.so.xz its sums file names is
# installed where FlashInfer looks for a prebuilt module (flashinfer/data/aot/NAME/NAME.so).
if [[ -f $PIECES/SHA256SUMS.moe90 ]]; then
  (cd "$PIECES" && sha256sum -c --quiet SHA256SUMS.moe90)
  while read -r _ file; do
    name=${file%.so.xz}
    aot=$SITE/flashinfer/data/aot/$name
    mkdir -p "$aot" && xz -dc "$PIECES/$file" >"$aot/$name.so"
    say "FlashInfer $name installed prebuilt: $aot"
  done <"$PIECES/SHA256SUMS.moe90"
fi

if [[ ${NO_IMPORT_CHECK:-0} == 1 ]]; then say "unpacked; NO_IMPORT_CHECK=1: imports not checked"; exit 0; fi
# What the engine's processes import with the site first on the path (sitecustomize.py in the site runs the CuTe
# DSL's .pth and lets torch use the host's cuDNN 9.19; torch finds the carried NCCL through its RPATH).
PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} "$PY" - "$SITE" <<'EOF'
import os, sys
site = os.path.realpath(sys.argv[1])
import torch, triton, vllm, flashinfer, transformers, numpy, cutlass
mods = dict(torch=torch, triton=triton, vllm=vllm, flashinfer=flashinfer, transformers=transformers, numpy=numpy,
            cutlass=cutlass)
bad = []
for name, mod in mods.items():
    where = os.path.realpath(mod.__file__)
    ok = where.startswith(site + os.sep)
    bad += [] if ok else [name]
    print(f"  {name:12} {getattr(mod, '__version__', '?'):18} {'bundle' if ok else 'HOST: ' + where}")
maps = open("/proc/self/maps").read()
libs = sorted({line.split()[-1] for line in maps.splitlines() if "libnccl.so" in line or "libcudnn.so" in line
               or "libcublas.so" in line})
print("  nccl", ".".join(map(str, torch.cuda.nccl.version())), "cuda", torch.version.cuda,
      "gpus", torch.cuda.device_count())
for lib in libs:
    print("   ", lib)
if not any(lib.startswith(site + os.sep) and "libnccl" in lib for lib in libs):
    bad.append("nccl (not the carried 2.29)")
# A prebuilt FlashInfer module that does not load would fail every engine that needs it (FlashInfer loads a prebuilt
# module instead of building one, flashinfer/jit/core.py build_and_load): such a one is removed, and FlashInfer
# JIT-builds it as it did before the upload carried it.
import glob, shutil, tvm_ffi
for so in sorted(glob.glob(os.path.join(site, "flashinfer", "data", "aot", "*", "*.so"))):
    try:
        tvm_ffi.load_module(so)
        print(f"  prebuilt     {os.path.basename(so):18} loads")
    except Exception as exc:  # any failure to load means the same for the engine
        shutil.rmtree(os.path.dirname(so))
        print(f"  prebuilt     {os.path.basename(so):18} REMOVED, does not load ({exc}): FlashInfer builds it")
if bad:
    sys.exit(f"host_install: from the host, not the bundle: {', '.join(bad)}")
EOF
say "installed. In each command on this host (run_queue.sh sets the first itself with VLLM_SITE=$SITE):"
echo "export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
echo "export LD_LIBRARY_PATH=$SITE/nvidia/nccl/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}  # optional: torch's RPATH finds it"
