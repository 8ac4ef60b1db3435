#!/usr/bin/env bash
# Docker HEALTHCHECK: GET /ping on the port the server listens on (SAGEMAKER_BIND_TO_PORT when
# SageMaker moved it, else 8080). Python's urllib, because the CUDA base image has no curl.
set -euo pipefail
PORT=${SAGEMAKER_BIND_TO_PORT:-8080}
exec python3 -c '
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(1)
' "http://127.0.0.1:${PORT}/ping"
