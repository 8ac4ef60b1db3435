"""entrypoint.resolve.tune_targets: the tile file a plan's Triton MoE kernel reads on its GPU, and the batch sizes
tuning it must cover (issue 32)."""

from __future__ import annotations

import json

import pytest

from entrypoint.model.describe import describe_model
from entrypoint.resolve.engine_args import EngineArgs
from entrypoint.resolve.tune_targets import batch_sizes, capture_sizes, tune_target
from tests.conftest_paths import FIXTURE_MODELS

STATIC = "qwen3-30b-a3b-fp8-static-synthetic"  # per-tensor static FP8, the backend rule's case
BLOCK = "block_shape=[128,128]"  # Qwen's own FP8 checkpoint and DeepSeek-V3: 128 x 128 block scales


def described(fixture: str):
    config = json.loads((FIXTURE_MODELS / fixture / "config.json").read_text())
    quant = FIXTURE_MODELS / fixture / "hf_quant_config.json"
    return describe_model(config, json.loads(quant.read_text()) if quant.is_file() else None, source=fixture)


def engine(seqs: int | None = None, tokens: int | None = None, tp: int = 1, ep: bool = False) -> EngineArgs:
    values = {"max_num_batched_tokens": str(tokens)} if tokens else {}
    return EngineArgs(values=values, tensor_parallel_size=tp, expert_parallel=ep, max_num_seqs=seqs)


def test_capture_sizes_follow_vllms_default_list() -> None:
    # vllm/config/vllm.py (0.32): 1, 2, 4, every 8 below 256, every 16 from 256, up to min(2 x seqs, 512, tokens)
    assert capture_sizes(64, 8192) == (1, 2, 4, *range(8, 129, 8))
    assert capture_sizes(1024, 8192) == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    assert capture_sizes(1, 8192) == (1, 2)  # max_num_seqs itself is captured
    assert capture_sizes(100, 96) == (1, 2, 4, *range(8, 97, 8))  # the token budget caps the graphs


def test_the_image_default_tunes_decode_sizes_first_then_prefill_chunks() -> None:
    decode, prefill = batch_sizes(engine(seqs=64))  # the image's serving.properties: 64 sequences
    assert decode == (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)
    assert prefill == (256, 512, 1024, 2048, 4096, 8192)  # vLLM's default chunk on an H200: 8192 tokens
    decode, prefill = batch_sizes(engine(seqs=48, tokens=3000))
    assert decode[-1] == 96 and prefill == (128, 256, 512, 1024, 2048, 3000)


@pytest.mark.parametrize(
    ("fixture", "split", "name", "gated"),
    [
        (STATIC, {}, "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", True),
        (STATIC, {"tp": 2}, "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", True),
        (STATIC, {"tp": 8, "ep": True}, "E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", True),
        ("qwen3-30b-a3b-fp8", {"tp": 2}, f"E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,{BLOCK}.json", True),
        ("nvidia-nemotron-3-nano-30b-a3b-fp8", {}, "E=128,N=1856,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", False),
        ("deepseek-v3", {"tp": 8}, f"E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,{BLOCK}.json", True),
    ],
)  # fmt: skip
def test_the_target_is_the_file_vllm_reads_under_the_plans_split(fixture: str, split: dict, name: str, gated: bool):
    target = tune_target(described(fixture), engine(seqs=64, **split), "NVIDIA H200")
    assert target.file_name == name
    assert target.shape.model.gated is gated and target.ms[0] == 1


def test_a_checkpoint_without_fp8_experts_has_nothing_to_tune() -> None:
    with pytest.raises(ValueError, match="FP8 MoE"):
        tune_target(described("qwen3-30b-a3b"), engine(), "NVIDIA H200")
