#!/usr/bin/env bash
# Build the offline engine bundle for the H200 device host (no network, Python 3.12, torch 2.11 stack): the cuda
# image's vLLM / torch / Triton / FlashInfer / transformers at exactly docker/cuda-constraints.txt's pins, with what
# the host lacks or cannot use, pruned, xz-compressed and split into one git-ignored folder per upload
# (.offline/p00, .offline/p01, ...; each with the tracked tree under an upload's 64 MiB). README.md beside this file
# gives the uploads; host_install.sh unpacks on the host. Steps already done are skipped (delete STAGE to start over;
# a changed lock, host list or selection/prune list starts over by itself: `bundle.py key`).
#   usage: build_bundle.sh [STAGE]        (default ~/.cache/h200-bundle/stage)
#   env:   PY (python with `packaging`, default .venv/bin/python), WHEELS (~/.cache/h200-bundle/whl: the lock's
#          cp312 wheels, missing ones are downloaded), OLD_WHEELS (~/.cache/h200-bundle/old-nvidia: the host's
#          nvidia-* versions, for symcheck.py), XZ_LEVEL (1: README.md, "xz level"), XZ_THREADS (2),
#          NO_TAR=1 (stop at the unpacked site), STAGE_ONLY=1 (only re-split the existing bundle into .offline for
#          the current tree size),
#          FATBIN_SM90=1 (blank GPU code for other architectures than sm_90: ~1/3 smaller, but check it on an H200
#          first with fatbin_check.sh; a separate STAGE, e.g. ~/.cache/h200-bundle/stage-sm90, keeps both)
set -euo pipefail
cd "$(dirname "$0")/../../.."
CACHE=$HOME/.cache/h200-bundle
STAGE=${1:-$CACHE/stage}
PY=${PY:-.venv/bin/python}
WHEELS=${WHEELS:-$CACHE/whl}
OLD_WHEELS=${OLD_WHEELS:-$CACHE/old-nvidia}
XZ_LEVEL=${XZ_LEVEL:-1}
XZ_THREADS=${XZ_THREADS:-2}
NICE=(nice -n 10)
PLATFORMS=(--python-version 3.12 --implementation cp --only-binary=:all:
  --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
for n in $(seq 5 39); do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
BUNDLE=$STAGE/engine.tar.xz
T0=$SECONDS

say() { printf '[build_bundle %4ds] %s\n' $((SECONDS - T0)) "$*"; }
bundle() { "${NICE[@]}" "$PY" -m benchmarks.device.offline_engine.bundle "$@"; }

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF /.offline/ "$exclude" 2>/dev/null || echo /.offline/ >>"$exclude"

if [[ ${STAGE_ONLY:-0} != 1 ]]; then
  # A different lock, old-lock revision or selection/prune code makes a different bundle: start over.
  key=$(bundle key --extra "xz-$XZ_LEVEL fatbin-${FATBIN_SM90:-0}")
  if [[ -d $STAGE && $(cat "$STAGE/.key" 2>/dev/null) != "$key" ]]; then
    say "inputs changed since $STAGE was built: starting over"
    rm -rf "$STAGE"
  fi
  mkdir -p "$STAGE" "$WHEELS" "$OLD_WHEELS"
  echo "$key" >"$STAGE/.key"

  say "1/7 wheels: the lock's in $WHEELS, the host's differing nvidia-* in $OLD_WHEELS"
  for pair in "$WHEELS:" "$OLD_WHEELS:--old-nvidia"; do
    dir=${pair%%:*} flag=${pair#*:}
    # shellcheck disable=SC2086 # $flag is empty or one word
    mapfile -t missing < <(bundle wheels $flag --wheels "$dir")
    if ((${#missing[@]})); then
      say "    downloading ${#missing[@]}: ${missing[*]}"
      "${NICE[@]}" "$PY" -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$dir" "${missing[@]}"
    fi
  done

  if [[ ! -f $STAGE/site/.installed ]]; then
    say "2/7 select (without the nvidia-* libraries) and install into $STAGE/site"
    bundle select --wheels "$WHEELS" --out "$STAGE/selection0.json"
    mapfile -t wheels < <("$PY" -c 'import json, sys; [print(sys.argv[2] + "/" + e["wheel"]) for e in json.load(open(sys.argv[1]))["travels"].values()]' "$STAGE/selection0.json" "$WHEELS")
    rm -rf "$STAGE/site" "$STAGE/site.tmp"
    "${NICE[@]}" "$PY" -m pip install -q --no-deps --no-compile --no-index --target "$STAGE/site.tmp" \
      "${PLATFORMS[@]}" "${wheels[@]}"
    mv "$STAGE/site.tmp" "$STAGE/site"
    touch "$STAGE/site/.installed"
  fi

  if [[ ! -f $STAGE/site/.pruned ]]; then
    say "3/7 prune"
    bundle prune "$STAGE/site"
    touch "$STAGE/site/.pruned"
  fi

  if [[ ! -f $STAGE/symcheck.json ]]; then
    say "4/7 symcheck: the site's ELF files against the host's nvidia-* libraries"
    "${NICE[@]}" "$PY" -m benchmarks.device.offline_engine.symcheck --lock docker/cuda-constraints.txt \
      --new-wheels "$WHEELS" --old-wheels "$OLD_WHEELS" --site "$STAGE/site" --out "$STAGE/symcheck.json.tmp"
    mv "$STAGE/symcheck.json.tmp" "$STAGE/symcheck.json"
  fi

  if [[ ! -f $STAGE/site/.nvidia ]]; then
    say "5/7 select with the symbol verdict; add the nvidia-* wheels that travel"
    bundle select --wheels "$WHEELS" --symcheck "$STAGE/symcheck.json" --out "$STAGE/selection.json"
    mapfile -t nv < <("$PY" -c 'import json, sys; from benchmarks.device.offline_engine.bundle import NVIDIA_LIBS as N; [print(sys.argv[2] + "/" + e["wheel"]) for n, e in json.load(open(sys.argv[1]))["travels"].items() if n in N]' "$STAGE/selection.json" "$WHEELS")
    rm -rf "$STAGE/nv"
    if ((${#nv[@]})); then
      # their own target, then merged: pip --target skips a top-level folder (nvidia/) that already exists
      "${NICE[@]}" "$PY" -m pip install -q --no-deps --no-compile --no-index --target "$STAGE/nv" \
        "${PLATFORMS[@]}" "${nv[@]}"
      rm -rf "$STAGE/nv/bin"
      cp -a "$STAGE/nv/." "$STAGE/site/"
      rm -rf "$STAGE/nv"
    fi
    cp "$STAGE/selection.json" "$STAGE/symcheck.json" "$STAGE/site/"
    mv "$STAGE/site/selection.json" "$STAGE/site/ENGINE_BUNDLE_selection.json"
    mv "$STAGE/site/symcheck.json" "$STAGE/site/ENGINE_BUNDLE_symcheck.json"
    touch "$STAGE/site/.nvidia"
  fi
  if [[ ${FATBIN_SM90:-0} == 1 && ! -f $STAGE/site/.fatbin ]]; then
    say "5b/7 FATBIN_SM90=1: blank the GPU code of other architectures than sm_90 (fatbin.py; fatbin_check.sh)"
    find "$STAGE/site" -type f -name '*.so*' -size +100k -print0 |
      xargs -0 "${NICE[@]}" "$PY" -m benchmarks.device.offline_engine.fatbin | tail -n 1
    touch "$STAGE/site/.fatbin"
  fi
  say "    site: $(du -sh "$STAGE/site" | cut -f1) unpacked"
  [[ ${NO_TAR:-0} == 1 ]] && { say "NO_TAR=1: stopping before the archive"; exit 0; }

  if [[ ! -f $BUNDLE ]]; then
    say "6/7 tar | xz -$XZ_LEVEL -T$XZ_THREADS (~2.5 min on 2 cores at -1, ~35 min at -6)"
    start=$SECONDS
    "${NICE[@]}" tar -C "$STAGE" --sort=name --exclude=site/.installed --exclude=site/.pruned \
      --exclude=site/.nvidia --exclude=site/.fatbin -cf - site |
      "${NICE[@]}" xz "-$XZ_LEVEL" "-T$XZ_THREADS" -c >"$BUNDLE.tmp"
    mv "$BUNDLE.tmp" "$BUNDLE"
    say "    $BUNDLE: $(du -b "$BUNDLE" | cut -f1) bytes in $((SECONDS - start)) s"
  fi
fi

[[ -f $BUNDLE ]] || { echo "build_bundle: no $BUNDLE; run without STAGE_ONLY=1 first" >&2; exit 1; }
say "7/7 pieces: one folder per upload in .offline/"
bundle stage --bundle "$BUNDLE" --dest .offline
say "done: $(find .offline -maxdepth 1 -name 'p[0-9][0-9]' | wc -l) uploads; README.md beside this script gives them"
