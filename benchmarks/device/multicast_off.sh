#!/bin/bash
# Sourced by every device script: NVLink multicast stays off on the GPU hosts (their operator's rule: a
# program that uses it can put the host's shared GPUs out of service for a day or more). NCCL, PyTorch symmetric
# memory and NVSHMEM each have a switch; vLLM has a fourth user: at TP > 1 on Hopper it fuses all-reduce +
# RMSNorm through FlashInfer, whose `auto` backend is `mnnvl` (cuMulticastCreate); `trtllm` keeps the fusion
# without multicast. benchmarks/e2e/parallel.py MULTICAST_OFF holds the same four (a test keeps them equal) and the
# harness refuses a multi-GPU row whose environment lacks any of them.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
export VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
