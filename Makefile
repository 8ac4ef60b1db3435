# moe-serving: LMI-compatible vLLM serving for FP8 MoE models, H200 first.
#
#   make run    serve the embedded default (tiny MoE model on the CPU vLLM) on 127.0.0.1:8080;
#               on a GPU host the image serves real models (make image-run MODEL_DIR=...)
#   make test   lint + unit + end-to-end tests (sets up .venv itself)
#   make image-test FLAVOUR=cpu   build the cpu image and run it the way SageMaker does (starts Docker itself)
#   make image-test FLAVOUR=cuda  build the cuda image (no GPU needed) and check what holds without a GPU
#
# Every target fails loudly: no `|| true` on anything that matters.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= $(or $(SAGEMAKER_BIND_TO_PORT),8080)
# cuda: the shipped image (an H200 build host); cpu: the same stages on a local Debian base, any machine.
FLAVOUR ?= cuda
IMAGE ?= moe-serving:$(if $(filter cpu,$(FLAVOUR)),cpu,latest)
MODEL_DIR ?= $(CURDIR)/model
PROPERTIES ?= serving.properties
INSTANCE_TYPE ?= ml.p5e.48xlarge
ENDPOINT_NAME ?= moe-serving
MODELS ?=
BACKENDS ?=
CONC ?= 1,8,16,32,64

.PHONY: help venv run test test-unit test-e2e test-gpu triton-aot-env lint bench bench-serving bench-kernels bench-e2e tune aot \
        image image-run image-test cache-layer cuda-lock plan deploy invoke delete clean

help:
	@awk '/^#/ { sub(/^# ?/, ""); print; next } { exit }' Makefile
	@echo "targets: venv run test test-unit test-e2e test-gpu lint bench-serving bench-kernels bench-e2e tune aot"
	@echo "         image image-run image-test cache-layer cuda-lock plan deploy invoke delete clean"

$(VENV)/.stamp: pyproject.toml scripts/setup_venv.sh docker/install_vllm_cpu.sh docker/cpu_versions.sh
	bash scripts/setup_venv.sh

# Triton 3.7.1 + vLLM 0.32's fused_moe.py under build/, the image's, for the no-GPU compile tests (tests/triton_aot.py:
# tests/kernels/test_aot.py, tests/ops/test_fused_moe_fp8_{aot,ptx}.py).
build/triton-3.7.1/.stamp build/vllm-0.32.0/fused_moe.py: scripts/setup_aot_env.sh | $(VENV)/.stamp
	PY=$(PY) bash scripts/setup_aot_env.sh

triton-aot-env: build/triton-3.7.1/.stamp build/vllm-0.32.0/fused_moe.py

venv: $(VENV)/.stamp

run: venv
	$(PY) -m entrypoint run-local --port $(PORT)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/hadolint --failure-threshold error Dockerfile docker/cache-layer.Dockerfile
	$(VENV)/bin/shellcheck --external-sources docker/*.sh scripts/*.sh benchmarks/device/*.sh

# GPU tests (-m gpu) run on an H200 with `make test-gpu`; they are deselected here, not skipped.
# Two pytest lanes at once, the e2e tests and the rest (scripts/pytest_lanes.sh says why).
test: venv triton-aot-env lint
	PY=$(PY) bash scripts/pytest_lanes.sh

test-unit: venv
	$(PY) -m pytest -q -p no:cacheprovider -m "not e2e and not gpu and not image" tests

test-e2e: venv
	$(PY) -m pytest -q -p no:cacheprovider -m e2e tests

# On an H200 host with the image's vLLM (0.32) importable: inside the image, or the offline bundle.
test-gpu:
	bash scripts/test_gpu.sh

bench: bench-kernels bench-e2e

# Middleware latency/throughput against plain vLLM on the CPU engine (tiny model), any machine; then what the
# /invocations body checks cost next to decoding the JSON (no server).
bench-serving: venv
	$(PY) -m benchmarks.serving.bench_middleware --out out/serving
	$(PY) -m benchmarks.serving.bench_body_parse --out out/serving

bench-kernels:
	python3 -m benchmarks.kernels.bench_moe_configs
	python3 -m benchmarks.kernels.bench_fused_moe
	python3 -m benchmarks.kernels.bench_rope_fp8

# On an H200 host with the image's vLLM importable, e.g. make bench-e2e MODELS=qwen3-30b-a3b-fp8-static BACKENDS=auto,plan,triton CONC=1,8,64
bench-e2e:
	python3 -m benchmarks.e2e run $(if $(MODELS),--models $(MODELS)) $(if $(BACKENDS),--backends $(BACKENDS)) --conc $(CONC)

tune:
	python3 -m tools.tune $(TUNE_ARGS)

# Bake the Triton cache for the tuned configs (no GPU needed); the image does this in its aot stage.
aot:
	python3 -m kernels.aot bake $(AOT_ARGS)

# Starts a Docker engine when none answers (installing Debian's docker.io if needed) and stops only that one.
image:
	bash docker/with_engine.sh bash docker/build_image.sh $(FLAVOUR) $(IMAGE)

image-run:
	docker run --rm $(if $(filter cuda,$(FLAVOUR)),--gpus all --shm-size 16g) -p $(PORT):8080 \
	  $(if $(wildcard $(MODEL_DIR)),-v $(MODEL_DIR):/opt/ml/model:ro) $(IMAGE) serve

# On the GPU host: tune the served plan's MoE kernels for MODEL_DIR on this GPU (TUNE=auto|on|off, at most
# TUNE_BUDGET_S seconds; a killed tune resumes), then bake the compile caches of one start and the bake's requests,
# and layer both onto the image as CACHE_IMAGE (docs/image.md, docs/kernels.md).
CACHE_IMAGE ?= $(IMAGE)-cache
TUNE ?= auto
TUNE_BUDGET_S ?= 600
cache-layer:
	CACHE_LAYER_RUN_ARGS="$(if $(filter cuda,$(FLAVOUR)),--gpus all --shm-size 16g) $(CACHE_LAYER_RUN_ARGS)" \
	  CACHE_LAYER_BAKE_ARGS="--tune $(TUNE) --tune-budget-s $(TUNE_BUDGET_S)" \
	  bash docker/with_engine.sh bash docker/cache_layer.sh $(IMAGE) $(MODEL_DIR) build/cache-layer $(CACHE_IMAGE)

# Builds the image, then the container tests (tests/image) against it, in one engine session.
image-test: venv
	bash docker/with_engine.sh bash docker/image_test.sh $(FLAVOUR) $(IMAGE)

# Write the cuda image's lock again (docker/cuda-constraints.txt) after a Dockerfile pin or a [project] dependency
# changed; review what moved (it prints every change). tests/image/test_cuda_pins.py fails until then.
cuda-lock: venv
	$(PY) -m tools.cuda_lock

plan: venv
	$(PY) -m sagemaker_deploy plan --instance-type $(INSTANCE_TYPE) --properties $(PROPERTIES) $(if $(MODEL),--model $(MODEL))

deploy: venv
	$(PY) -m sagemaker_deploy deploy --endpoint-name $(ENDPOINT_NAME) --instance-type $(INSTANCE_TYPE) \
	  --image-uri "$(IMAGE_URI)" --role "$(ROLE_ARN)" --properties $(PROPERTIES) $(if $(MODEL_DATA),--model-data $(MODEL_DATA))

invoke: venv
	$(PY) -m sagemaker_deploy invoke --endpoint-name $(ENDPOINT_NAME) --prompt "$(or $(PROMPT),What is a mixture of experts?)"

delete: venv
	$(PY) -m sagemaker_deploy delete --endpoint-name $(ENDPOINT_NAME)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
