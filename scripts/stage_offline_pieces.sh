#!/usr/bin/env bash
# Stage what an H200 host without network needs, as git-ignored folders that the device tool's `carry`
# sends one per call (a call carries ≤ 64 MiB): .offline/p00, .offline/p01, .offline/p02 (the offline vLLM 0.26
# bundle of ../shared/tools/offline-vllm, built once by its prepare.sh into ~/.cache) and .whl (wheels the
# project needs there beyond that bundle). docs/h200-runbook.md gives the calls.
set -euo pipefail
PIECES=${PIECES:-$HOME/.cache/offline-vllm-0.26.0/pieces}
PY=${PY:-python3}

if [ ! -f "$PIECES/SHA256SUMS" ]; then
  echo "stage_offline_pieces: no offline bundle in $PIECES; build it first (~20-55 min):" >&2
  echo "  bash ../shared/tools/offline-vllm/prepare.sh" >&2
  exit 1
fi
for ignored in /.offline/ /.whl/; do
  grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >>.git/info/exclude
done
rm -rf .offline && mkdir -p .offline/p00 .offline/p01 .offline/p02 .whl
# A call carries the working tree too (6.1 MB on 2026-12-03d, growing with every filed lease): a whole 58 MiB part
# left 150 KB under the 64 MiB limit. So the first two parts travel as a 50 MB head (p00, p01) and a tail that rides
# in p02; scripts/join_offline_pieces.sh puts them back together on the host before host_install.sh checks them.
split -b "${HEAD_BYTES:-50000000}" -d -a 1 "$PIECES/bundle.part.00" .offline/p00/bundle.part.00.s
split -b "${HEAD_BYTES:-50000000}" -d -a 1 "$PIECES/bundle.part.01" .offline/p01/bundle.part.01.s
for tail in .offline/p00/bundle.part.00.s[1-9] .offline/p01/bundle.part.01.s[1-9]; do
  [ -e "$tail" ] && mv "$tail" .offline/p02/  # a part no larger than the head has no tail
done
cp "$PIECES"/bundle.part.0[2-9] "$PIECES/SHA256SUMS" "$PIECES/host_install.sh" .offline/p02/
[ -f "$PIECES/fused_moe_90.so.xz" ] && cp "$PIECES/fused_moe_90.so.xz" .offline/p02/
# The resolver reads serving.properties with javaproperties, which the vLLM bundle lacks.
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d .whl javaproperties==0.8.2 2>&1 | { grep -v "is ignored" || true; }
ls .whl/javaproperties-0.8.2-*.whl >/dev/null
du -sh .offline/p0* .whl
tree=$(git ls-files -z | du -cb --files0-from=- | tail -n 1 | cut -f1)  # one du: one total
for folder in .offline/p00 .offline/p01 .offline/p02; do  # what one call sends: the tree and one folder
  size=$((tree + $(du -cb "$folder" | tail -n 1 | cut -f1)))
  if ((size > 64 * 1024 * 1024)); then
    echo "stage_offline_pieces: $folder with the tracked tree is $size bytes, over a call's 64 MiB; lower HEAD_BYTES" >&2
    exit 1
  fi
done
