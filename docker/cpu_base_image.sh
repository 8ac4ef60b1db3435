#!/usr/bin/env bash
# The base image of both flavours, made here instead of pulled (no container registry answers on the development
# and CI machines): a Debian 12 minbase made by debootstrap from Debian's own package mirror, imported as
# TAG. Debian 12 because its python3 is 3.11, the one Python the CPU engine's torch wheel is kept for here.
# Cached twice: an existing TAG is kept, and the root filesystem's tarball is kept in CACHE_DIR for the next
# daemon (a fresh CI machine pays debootstrap once, ~30 s-3 min).
#   usage: cpu_base_image.sh TAG
#   env:   DOCKER (client, set by with_engine.sh), CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/moe-serving)
set -euo pipefail

TAG=${1:?usage: cpu_base_image.sh TAG}
DOCKER=${DOCKER:-docker}
SUITE=bookworm
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moe-serving}
TARBALL="$CACHE_DIR/debian-$SUITE-minbase.tar"

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    echo "cpu base: $TAG is already there"
    exit 0
fi
if [[ ! -s $TARBALL ]]; then
    if ! command -v debootstrap >/dev/null; then
        if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
            echo "cpu_base_image.sh: debootstrap is missing; install it, or pass BASE_IMAGE=<a Debian 12 image>" >&2
            exit 2
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    mkdir -p "$CACHE_DIR"
    root=$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    echo "cpu base: debootstrap --variant=minbase $SUITE (a few minutes the first time)"
    start=$SECONDS
    debootstrap --variant=minbase "$SUITE" "$root" >"$CACHE_DIR/debootstrap.log" 2>&1 || {
        tail -20 "$CACHE_DIR/debootstrap.log" >&2
        exit 1
    }
    tar -C "$root" -cf "$TARBALL.part" .
    mv "$TARBALL.part" "$TARBALL"
    echo "cpu base: root filesystem in $((SECONDS - start)) s, kept as $TARBALL"
fi
# An imported image has no configuration: give it the PATH a pulled Debian image has (`ENV PATH=...:${PATH}`
# in the Dockerfile would otherwise expand to almost nothing).
"$DOCKER" import --message "debootstrap --variant=minbase $SUITE" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$TARBALL" "$TAG" >/dev/null
echo "cpu base: imported $TAG"
