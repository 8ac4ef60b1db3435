#!/usr/bin/env bash
# On the H200 host, after the three piece calls: put the parts that scripts/stage_offline_pieces.sh split for
# transport (bundle.part.NN.s0, .s1, ...) back together, so that host_install.sh finds and checks bundle.part.NN.
#   usage: join_offline_pieces.sh PIECES_DIR
set -euo pipefail
DIR=${1:?usage: join_offline_pieces.sh PIECES_DIR}
shopt -s nullglob
for head in "$DIR"/bundle.part.[0-9][0-9].s0; do
  part=${head%.s0}
  cat "$part".s[0-9] >"$part.joining"
  mv "$part.joining" "$part"
  rm "$part".s[0-9]
  echo "join_offline_pieces: $(basename "$part") ($(du -b "$part" | cut -f1) bytes)"
done
