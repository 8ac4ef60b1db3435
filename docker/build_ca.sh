#!/usr/bin/env bash
# Sourced by the build steps that run pip. Where a machine's TLS traffic goes through its own certificate
# authority, `docker build --secret id=ca,src=FILE` mounts that CA bundle at /run/secrets/ca for one RUN step
# only (docker/build_image.sh passes the file pip itself is configured with); nothing of it lands in a layer.
# Without the secret pip uses its own bundle, as on any normal build host.
if [[ -s /run/secrets/ca ]]; then
    export PIP_CERT=/run/secrets/ca
fi
