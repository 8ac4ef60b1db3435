"""option.moe_backend / option.moe_kernel: normalised once into their enums, unknown names refused with a hint."""

from __future__ import annotations

import json

import pytest

from entrypoint.config.moe import MoeBackend, MoeKernel, parse_moe_backend, parse_moe_kernel
from entrypoint.resolve.vllm_caps import SNAPSHOT_DIR
from entrypoint.utils.errors import ConfigError


@pytest.mark.parametrize("snapshot", sorted(p.name for p in SNAPSHOT_DIR.glob("vllm_*.json")))
def test_every_backend_name_of_every_committed_vllm_snapshot_is_a_member(snapshot: str) -> None:
    values = json.loads((SNAPSHOT_DIR / snapshot).read_text())["moe_backend_values"]
    assert values, snapshot
    assert set(values) <= {backend.value for backend in MoeBackend}, set(values) - set(MoeBackend)


@pytest.mark.parametrize(
    ("text", "backend"),
    [
        pytest.param(None, MoeBackend.AUTO, id="unset is auto"),
        pytest.param("  ", MoeBackend.AUTO, id="blank is auto"),
        pytest.param("triton", MoeBackend.TRITON, id="a name as vLLM writes it"),
        pytest.param(" Flashinfer-Cutlass ", MoeBackend.FLASHINFER_CUTLASS, id="case, dashes and spaces are folded"),
    ],
)
def test_a_backend_name_is_normalised_once(text: str | None, backend: MoeBackend) -> None:
    assert parse_moe_backend(text) is backend


def test_an_unknown_backend_names_the_key_the_value_a_hint_and_every_name() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_moe_backend("Tritn", "OPTION_MOE_BACKEND (option.moe_backend)")
    message = str(caught.value)
    assert message.startswith("OPTION_MOE_BACKEND (option.moe_backend)='Tritn': not a vLLM MoE backend")
    assert "(did you mean triton?)" in message
    assert caught.value.accepted == ", ".join(backend.value for backend in MoeBackend)


def test_moe_kernel_values() -> None:
    assert parse_moe_kernel(None) is MoeKernel.AUTO
    assert parse_moe_kernel("VLLM") is MoeKernel.VLLM
    assert parse_moe_kernel("project") is MoeKernel.PROJECT  # parsed; the resolver refuses it (not shipped)
    with pytest.raises(ConfigError, match=r"option.moe_kernel='cuda': unknown value. Accepted: auto, vllm"):
        parse_moe_kernel("cuda")
