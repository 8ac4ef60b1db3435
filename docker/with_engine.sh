#!/usr/bin/env bash
# Run a command against a Docker engine that builds with BuildKit, also on a development or CI machine that
# reaches no container registry (docs/reference/docker-on-dev-machines.md):
# - a daemon that already answers is used as it is, and left running;
# - otherwise Debian's docker.io is installed if missing (root and apt-get only), and dockerd is started without
#   a bridge network (containers use --network host, so none gets a private-range address); that daemon, and
#   only that one, is stopped when the command ends, whatever its outcome.
# The command gets DOCKER (the client to call) and DOCKER_BUILDKIT=1 in its environment.
#   usage: with_engine.sh COMMAND [ARGS...]
#   env:   DOCKER (a client to use instead of the one picked here), DOCKERD_LOG (default $TMPDIR/moe-serving-dockerd.log)
set -euo pipefail

(($#)) || { echo "usage: with_engine.sh COMMAND [ARGS...]" >&2; exit 2; }
LOG=${DOCKERD_LOG:-${TMPDIR:-/tmp}/moe-serving-dockerd.log}

# A client that can drive BuildKit: one with the buildx plugin, else Debian's 20.10 client, whose built-in
# BuildKit needs no plugin (a newer client without buildx refuses BuildKit builds).
pick_client() {
    if [[ -n ${DOCKER:-} ]]; then
        echo "$DOCKER"
    elif command -v docker >/dev/null && docker buildx version >/dev/null 2>&1; then
        echo docker
    elif [[ -x /usr/bin/docker ]]; then
        echo /usr/bin/docker
    fi
}

install_engine() {
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
        echo "with_engine.sh: no Docker engine here; install Docker (with BuildKit), or run as root on Debian" >&2
        exit 2
    fi
    echo "docker engine: installing Debian's docker.io (no usable client or daemon found)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
}

DOCKER=$(pick_client)
if [[ -z $DOCKER ]] || { ! "$DOCKER" info >/dev/null 2>&1 && ! command -v dockerd >/dev/null; }; then
    install_engine
    DOCKER=$(pick_client)
fi

started=""
stop_engine() {
    local rc=$?
    if [[ -n $started ]]; then
        echo "docker engine: stopping the dockerd this run started (pid $started)"
        kill -TERM "$started" 2>/dev/null || true
        for _ in $(seq 60); do
            kill -0 "$started" 2>/dev/null || break
            sleep 0.5
        done
    fi
    exit "$rc"
}
trap stop_engine EXIT

if "$DOCKER" info >/dev/null 2>&1; then
    echo "docker engine: using the daemon already running"
else
    echo "docker engine: starting dockerd (no bridge network; log $LOG)"
    dockerd --bridge=none --iptables=false --ip-masq=false >"$LOG" 2>&1 &
    started=$!
    for _ in $(seq 120); do
        "$DOCKER" info >/dev/null 2>&1 && break
        if ! kill -0 "$started" 2>/dev/null; then
            echo "with_engine.sh: dockerd exited at start; its log:" >&2
            cat "$LOG" >&2
            started=""
            exit 1
        fi
        sleep 0.5
    done
    "$DOCKER" info >/dev/null
fi

export DOCKER DOCKER_BUILDKIT=1
"$@"
