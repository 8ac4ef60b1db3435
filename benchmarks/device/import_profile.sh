#!/bin/bash
# Where a start spends the seconds before vLLM's first log line (issue 14: ~26 s of a 64 s warm start on
# 2026-12-03, more than torch.compile's AOT load). Three timings on the H200 host, RUNS times each (default 1: after
# an e2e phase the .pyc files are written and the pages read, as in a restarted container):
#   resolve  `python -m entrypoint resolve` on the model the e2e harness made: our part before the exec
#   import   `import vllm.entrypoints.cli.main` under -X importtime: vLLM's import, with the modules that cost most
#   help     `python -m entrypoint.serve serve --help`: the import plus vLLM building its argument parser
# usage (repo root, after an e2e phase in the same WORK_DIR):  OUT=DIR bash benchmarks/device/import_profile.sh
# env: MODEL (default: the first model copy the e2e harness made in WORK_DIR), RESOLVE_ARGS (e.g. "--gpu H200" off the GPU host;
#      default none: the resolver detects the GPU as `serve` does), RUNS (1)
# Writes OUT/import_profile.csv (what,run,wall_s) and OUT/importtime-top.txt (the 40 costliest imports by
# cumulative µs, last run).
set -uo pipefail
: "${OUT:?import_profile needs OUT}"
WORK_DIR=${WORK_DIR:-/tmp/e2e-bench-work}
for made in "$WORK_DIR"/served-models/*/; do  # default: the first model copy an e2e step made there
  MODEL=${MODEL:-${made%/}}
  break
done
MODEL=${MODEL:-$WORK_DIR/served-models/none}
RUNS=${RUNS:-1}
read -ra resolve_args <<<"${RESOLVE_ARGS:-}"
mkdir -p "$OUT"
CSV=$OUT/import_profile.csv
echo "what,run,wall_s" >"$CSV"

timed() {  # timed WHAT RUN CMD...: wall seconds of CMD into the CSV; its stderr into OUT/WHAT-RUN.err
  local what=$1 run=$2 t0 t1
  shift 2
  t0=$(date +%s%N)
  "$@" >"$OUT/$what-$run.out" 2>"$OUT/$what-$run.err"
  local rc=$?
  t1=$(date +%s%N)
  local ms=$(((t1 - t0) / 1000000))
  printf '%s,%s,%d.%03d\n' "$what" "$run" $((ms / 1000)) $((ms % 1000)) >>"$CSV"
  ((rc == 0)) || echo "import_profile: $what run $run exited $rc (see $what-$run.err)" >&2
}

for run in $(seq "$RUNS"); do
  if [ -f "$MODEL/config.json" ]; then
    timed resolve "$run" python3 -m entrypoint resolve --model "$MODEL" "${resolve_args[@]}"
  else
    echo "import_profile: no model at $MODEL (run an e2e phase first); resolve not timed" >&2
  fi
  timed import "$run" python3 -X importtime -c "import vllm.entrypoints.cli.main"
  timed help "$run" python3 -m entrypoint.serve serve --help
done
# -X importtime lines: "import time: self [us] | cumulative | imported package"
grep '^import time:' "$OUT/import-$RUNS.err" | sort -t'|' -k2 -n -r | head -n 40 >"$OUT/importtime-top.txt"
cat "$CSV"
