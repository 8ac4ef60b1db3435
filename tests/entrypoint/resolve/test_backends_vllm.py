"""entrypoint.resolve.backends against the installed vLLM 0.32's own FP8 MoE oracle (tests/entrypoint/resolve/
vllm_oracle.py: vLLM's code on a simulated CUDA GPU): what `--moe-backend auto` picks, which explicit values vLLM
accepts, its priority order, its expert-count limits and how it lays block-FP8 experts over a TP split. Every
checkpoint scheme the resolver describes × the GPUs it plans for (SM75 to SM120) × tensor or expert parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization
from entrypoint.resolve.backends import (
    FP8_PRIORITY,
    backend_support,
    fp8_block_split,
    fp8_priority,
    predict_vllm_auto,
)
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, detect_capabilities
from tests.entrypoint.resolve.vllm_oracle import backend_names, fp8_moe_method, moe_config, simulated_cuda
from tests.entrypoint.resolver_cases import SCHEMES

_CT = {"family": QuantFamily.COMPRESSED_TENSORS, "method": "compressed-tensors"}
FP8_SCHEMES = {
    "native fp8 static": SCHEMES["native fp8 static"],
    "native fp8 dynamic": SCHEMES["native fp8 dynamic"],
    "native fp8 block": SCHEMES["fp8 block"],
    "modelopt fp8": SCHEMES["modelopt fp8"],
    "ct tensor static": SCHEMES["ct tensor static"],
    "ct tensor dynamic": SCHEMES["ct tensor static"].model_copy(update={"activation_scheme": ActivationScheme.DYNAMIC}),
    "ct channel token": SCHEMES["ct channel token"],
    "ct block": SCHEMES["fp8 block"].model_copy(update=_CT),
}
SMS = (75, 80, 89, 90, 100, 103, 120)  # T4, A100, L40S, H100/H200, B200, B300, RTX PRO 6000
FP8_BACKENDS = detect_capabilities().family_backends["fp8"]  # the installed vLLM's map_fp8_backend keys


@pytest.fixture(scope="module")
def set_sm() -> Iterator[Callable[[int], None]]:
    with simulated_cuda() as set_sm:
        yield set_sm


def _vllm_choice(quant: Quantization, **config: object) -> str:
    """What vLLM's oracle selects for this checkpoint, or "none" when it refuses (auto: NotImplementedError;
    an explicit backend it cannot run: ValueError)."""
    try:
        return backend_names()[fp8_moe_method(quant, moe_config(**config)).fp8_backend]  # type: ignore[arg-type]
    except (NotImplementedError, ValueError):
        return "none"


def test_the_installed_vllm_is_the_pinned_one() -> None:
    # the facts below are read from it; the resolver's defaults (PINNED_VLLM_VERSION) must name the same vLLM
    assert detect_capabilities().version.split("+")[0] == PINNED_VLLM_VERSION


@pytest.mark.parametrize("sm", SMS)
@pytest.mark.parametrize("scheme", FP8_SCHEMES)
def test_the_auto_prediction_is_what_vllms_oracle_picks(scheme: str, sm: int, set_sm) -> None:
    set_sm(sm)
    quant = FP8_SCHEMES[scheme]
    differ = []
    for ep in (False, True):
        ours, why = predict_vllm_auto(quant, sm, expert_parallel=ep, num_experts=128)
        theirs = _vllm_choice(quant, tp=8 if ep else 1, expert_parallel=ep)
        if ours != theirs:
            differ.append(f"{'EP' if ep else 'TP'}: vLLM picks {theirs}, the resolver predicts {ours} ({why})")
    assert differ == []


@pytest.mark.parametrize("sm", SMS)
@pytest.mark.parametrize("scheme", FP8_SCHEMES)
def test_each_explicit_backend_is_accepted_exactly_where_vllm_accepts_it(scheme: str, sm: int, set_sm) -> None:
    set_sm(sm)
    quant = FP8_SCHEMES[scheme]
    differ = []
    for ep in (False, True):
        for backend in FP8_BACKENDS:
            why_not = backend_support(backend, quant, sm, num_experts=128)
            runs = _vllm_choice(quant, tp=8 if ep else 1, expert_parallel=ep, backend=backend) == backend
            if runs != (why_not is None):
                differ.append(f"{backend} ({'EP' if ep else 'TP'}): vLLM {'runs' if runs else 'refuses'} it, the "
                              f"resolver says {why_not or 'it runs'}")  # fmt: skip
    assert differ == []


@pytest.mark.parametrize("sm", [90, 100, 89])
def test_the_priority_order_is_vllms(sm: int, set_sm) -> None:
    from vllm.model_executor.layers.fused_moe.oracle import fp8 as oracle_fp8
    from vllm.model_executor.layers.quantization.utils.quant_utils import kFp8StaticTensorSym

    set_sm(sm)
    names = backend_names()
    order = oracle_fp8._get_priority_backends(moe_config(), kFp8StaticTensorSym, kFp8StaticTensorSym)
    cuda = tuple(names[b] for b in order if b in names and names[b] in FP8_PRIORITY)
    assert cuda == fp8_priority(sm)


def test_humming_goes_ahead_of_marlin_on_sm90_only_in_032() -> None:
    from vllm.model_executor.layers.quantization.utils.humming.priority import prefers_humming

    assert [sm for sm in SMS if prefers_humming(sm)] == [90]
    assert fp8_priority(90).index("humming") < fp8_priority(90).index("marlin")
    assert fp8_priority(90, "0.26.0") == fp8_priority(100) == FP8_PRIORITY


@pytest.mark.parametrize(
    ("scheme", "sm", "backend", "limit"),
    [
        pytest.param("native fp8 dynamic", 90, "triton", 992, id="Triton aligns fewer than 1024 padded experts"),
        pytest.param("native fp8 static", 100, "flashinfer_trtllm", 2048, id="TRT-LLM routes at most 2048 experts"),
    ],
)
def test_the_expert_count_limits_are_vllms(scheme: str, sm: int, backend: str, limit: int, set_sm) -> None:
    set_sm(sm)
    quant = FP8_SCHEMES[scheme]
    for experts in (limit, limit + 1):
        theirs = _vllm_choice(quant, num_experts=experts, backend=backend) == backend
        assert theirs == (backend_support(backend, quant, sm, num_experts=experts) is None), experts
        auto = _vllm_choice(quant, num_experts=experts)
        assert auto == predict_vllm_auto(quant, sm, expert_parallel=False, num_experts=experts)[0], experts
    assert backend_support(backend, quant, sm, num_experts=limit + 1, vllm_version="0.26.0") is None


# (expert width, hidden size, TP): Qwen3-235B (192 per GPU at TP8: refined to 64), a width no block of 32 divides
# at TP8 (180), DeepSeek-V3 (256 at TP8: fits), Qwen3-30B (96 at TP8: gcd 32), Qwen3-30B at TP4 (192)
SPLITS = [(1536, 4096, 8), (1440, 4096, 8), (2048, 7168, 8), (768, 2048, 8), (768, 2048, 4), (1536, 4096, 4)]


@pytest.mark.parametrize("backend", ["auto", "triton", "flashinfer_cutlass", "deep_gemm"])
@pytest.mark.parametrize(("width", "hidden", "tp"), SPLITS)
def test_the_block_split_is_what_vllm_does_with_it(
    width: int, hidden: int, tp: int, backend: str, set_sm, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vllm.distributed
    from vllm.model_executor.layers.quantization.utils.fp8_utils import validate_fp8_block_shape_moe

    set_sm(90)
    # what create_weights then checks reads the engine's TP size from the process group
    monkeypatch.setattr(vllm.distributed, "get_tensor_model_parallel_world_size", lambda: tp)
    quant = FP8_SCHEMES["native fp8 block"]
    for ep in (False, True):
        config = moe_config(width=width, hidden=hidden, tp=tp, expert_parallel=ep, backend=backend)
        ours = fp8_block_split(quant, width, hidden, tp, expert_parallel=ep, backend=backend)
        try:
            method = fp8_moe_method(quant, config)
            if method.weight_scale_refine is None:
                validate_fp8_block_shape_moe(config.intermediate_size_per_partition, list(quant.block_shape))
        except ValueError:
            outcome, block = "refused", quant.block_shape
        else:
            outcome = "refined" if method.weight_scale_refine else "padded" if config.tp_shard_with_padding else "fits"
            block = tuple(method.moe_block_shape)
        assert (ours.outcome, ours.block) == (outcome, block), f"EP={ep}: vLLM {outcome} {block}, resolver {ours}"
        if outcome == "padded":
            assert ours.width == config.intermediate_size_per_partition
    assert fp8_block_split(
        quant, 1536, 4096, 8, expert_parallel=False, backend="auto", vllm_version="0.26.0"
    ).outcome == ("refused")


def test_a_refined_block_goes_to_triton_only(set_sm) -> None:
    set_sm(90)
    refined = FP8_SCHEMES["native fp8 block"].model_copy(update={"block_shape": (64, 64)})
    assert predict_vllm_auto(refined, 90, expert_parallel=False)[0] == "triton"
    assert [b for b in FP8_BACKENDS if backend_support(b, refined, 90) is None] == ["triton"]
    assert refined.weight_granularity == Granularity.BLOCK
