"""What the resolver adds for vLLM's CPU engine (the cpu flavour, `make run` without a GPU), each with its reason.

A user's own setting of the same engine argument always wins: these apply only where the option is unset.
"""

from __future__ import annotations

from entrypoint.resolve.engine_args import EngineArgs
from entrypoint.resolve.vllm_caps import VllmCapabilities

# vLLM 0.32's CPU engine dies on a seeded request whose prefill is split over steps (chunked prefill): its model
# runner rewinds the request's generator with `set_offset`, which a CPU torch.Generator refuses ("CPU Generator does
# not use offset", vllm/v1/worker/gpu_model_runner.py `_bookkeeping_sync`). Seen with 256 seeded requests of 36 tokens
# at once on the tiny model (tests/e2e/test_seeded_burst.py). A GPU generator has offsets: the GPU engine is not
# affected.
SEEDED_CHUNK_CRASH = "vLLM's CPU engine dies on a seeded request with a chunked prefill"
CPU_VLLM_DOC = "docs/reference/cpu-vllm.md"  # the CPU engine's measured start times and known crashes

# The CPU engine's bake and warm-up keep their seeded batches to 8 x 36 tokens, one prefill step on the tiny model:
# the crash above. The plan turns chunked prefill off there, but a user's option.enable_chunked_prefill=true would
# bring it back, and the CPU engine runs eager, so larger batches would warm nothing.
CPU_MAX_SAMPLED_BATCH = 8


def cpu_engine_args(engine: EngineArgs, caps: VllmCapabilities) -> tuple[list[str], list[str]]:
    """(extra vLLM arguments, one reason line each) for the CPU engine."""
    args: list[str] = []
    reasons: list[str] = []
    if engine.enforce_eager is None:
        args.append("--enforce-eager")
        reasons.append(
            f"enforce_eager: on for the CPU engine (its compile cache fails to reload: 12 s start vs 24-35 s; "
            f"{CPU_VLLM_DOC})"
        )
    if "enable_chunked_prefill" in caps.engine_args and "enable_chunked_prefill" not in engine.values:
        if "max_num_batched_tokens" in engine.values:
            # without chunking vLLM needs a step to hold a whole prompt (max_num_batched_tokens >= max_model_len) and
            # refuses to start otherwise: a user's step budget keeps vLLM's default
            reasons.append(
                "enable_chunked_prefill: left to vLLM on the CPU engine (max_num_batched_tokens is set; beware: "
                f"{SEEDED_CHUNK_CRASH}, {CPU_VLLM_DOC})"
            )
        else:
            args.append("--no-enable-chunked-prefill")
            reasons.append(f"enable_chunked_prefill: off for the CPU engine ({SEEDED_CHUNK_CRASH}; {CPU_VLLM_DOC})")
    return args, reasons
