# The image plus its compile-cache layer: what one start of the served plan compiled on a GPU host
# (`python -m entrypoint bake-cache`, run by docker/cache_layer.sh = `make cache-layer`). The build context is the
# bake's output folder. `serve` copies the layer into the run-time caches before vLLM starts when it was made for
# the same software, GPU and plan (entrypoint/caches/compile_layer.py), and logs one line either way.
ARG BASE_IMAGE=moe-serving:latest
FROM ${BASE_IMAGE}
COPY . /opt/moe-serving/compile-cache/
