#!/usr/bin/env bash
# Smoke-test a built image on a host with Docker and an NVIDIA GPU (make image-test):
# start it on MODEL_DIR, poll /ping until it answers 200 or the deadline passes, send one LMI
# request, check the answer has generated_text. On any failure the container's log is printed.
# The container is always removed.
#   usage: image_test.sh IMAGE MODEL_DIR
#   env:   PORT (host port, default 8080), DEADLINE_S (default 1800), GPUS (default all)
set -euo pipefail

IMAGE=${1:?usage: image_test.sh IMAGE MODEL_DIR}
MODEL_DIR=${2:?usage: image_test.sh IMAGE MODEL_DIR}
PORT=${PORT:-8080}
DEADLINE_S=${DEADLINE_S:-1800}
GPUS=${GPUS:-all}

if [[ ! -d $MODEL_DIR ]]; then
    echo "image_test.sh: MODEL_DIR=$MODEL_DIR is not a directory (want a checkpoint with config.json)" >&2
    exit 2
fi
MODEL_DIR=$(cd "$MODEL_DIR" && pwd)

cid=""
cleanup() {
    local rc=$?
    if [[ -n $cid ]]; then
        if ((rc != 0)); then
            echo "---- container log ($cid) ----" >&2
            docker logs "$cid" >&2 || true
            echo "---- end of container log ----" >&2
        fi
        docker rm -f "$cid" >/dev/null || true
    fi
    exit "$rc"
}
trap cleanup EXIT

cid=$(docker run -d --gpus "$GPUS" --shm-size 16g -p "127.0.0.1:${PORT}:8080" \
    -v "${MODEL_DIR}:/opt/ml/model:ro" "$IMAGE" serve)
echo "started $cid from $IMAGE; waiting up to ${DEADLINE_S}s for /ping"

start=$SECONDS
until curl -fsS -m 2 -o /dev/null "http://127.0.0.1:${PORT}/ping"; do
    if [[ $(docker inspect -f '{{.State.Running}}' "$cid") != true ]]; then
        echo "image_test.sh: the container exited before /ping answered" >&2
        exit 1
    fi
    if ((SECONDS - start > DEADLINE_S)); then
        echo "image_test.sh: /ping did not answer 200 within ${DEADLINE_S}s" >&2
        exit 1
    fi
    sleep 5
done
echo "/ping is 200 after $((SECONDS - start))s"

body=$(curl -fsS -m 60 -H 'Content-Type: application/json' \
    -d '{"inputs": "What is a mixture of experts?", "parameters": {"max_new_tokens": 8}}' \
    "http://127.0.0.1:${PORT}/invocations")
echo "/invocations: $body"
if ! python3 -c 'import json, sys; sys.exit(0 if isinstance(json.loads(sys.argv[1]).get("generated_text"), str) else 1)' "$body"; then
    echo "image_test.sh: the answer has no generated_text string" >&2
    exit 1
fi
echo "image test passed"
