#!/usr/bin/env bash
# Docker HEALTHCHECK: GET /ping on the port the server listens on (SAGEMAKER_BIND_TO_PORT when
# SageMaker moved it, else 8080). Python's urllib, because the CUDA base image has no curl.
# A worker node (option.node_role=worker, or a LeaderWorkerSet pod with LWS_WORKER_INDEX > 0) runs vLLM headless, with
# no HTTP server: there it is healthy while one of vLLM's engine processes (VLLM::EngineCore) lives. `serve` records
# the role at each start (entrypoint/serve.py, write_role_file); docs/deployment.md, "Multi-node", says why.
set -euo pipefail
PORT=${SAGEMAKER_BIND_TO_PORT:-8080}
ROLE_FILE=${MOE_SERVING_ROLE_FILE:-/tmp/moe-serving/node-role}
if [[ -r $ROLE_FILE && $(<"$ROLE_FILE") == worker ]]; then
    for comm in /proc/[0-9]*/comm; do
        # /proc/PID/comm keeps 15 characters of vLLM's process title
        if [[ $(cat "$comm" 2>/dev/null) == VLLM::EngineCor* ]]; then
            exit 0
        fi
    done
    echo "headless worker: no vLLM EngineCore process" >&2
    exit 1
fi
exec python3 -c '
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(1)
' "http://127.0.0.1:${PORT}/ping"
