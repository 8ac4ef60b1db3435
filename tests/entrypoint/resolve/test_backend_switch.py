"""How a chosen backend reaches vLLM: the flag from 0.17, the era's variables before, nothing for auto."""

from __future__ import annotations

import pytest

from entrypoint.config.moe import MoeBackend
from entrypoint.resolve.backend_switch import PRE_017_BACKEND_ENV, BackendSwitch, render_backend_switch
from entrypoint.resolve.vllm_caps import load_snapshot

OLD, CURRENT = load_snapshot("0.16.0"), load_snapshot("0.26.0")


def test_auto_passes_nothing_on_any_version() -> None:
    assert render_backend_switch(MoeBackend.AUTO, CURRENT) == BackendSwitch()
    assert render_backend_switch(MoeBackend.AUTO, OLD) == BackendSwitch()


def test_from_0_17_a_backend_is_the_moe_backend_flag_and_nothing_else() -> None:
    switch = render_backend_switch(MoeBackend.MARLIN, CURRENT)
    assert switch == BackendSwitch(args=("--moe-backend", "marlin"))


@pytest.mark.parametrize("backend", sorted(PRE_017_BACKEND_ENV))
def test_before_0_17_a_backend_is_that_eras_environment_with_a_reason(backend: MoeBackend) -> None:
    switch = render_backend_switch(backend, OLD)
    assert switch.args == ()
    assert switch.env == PRE_017_BACKEND_ENV[backend]
    assert switch.reasons == (f"vLLM 0.16.0 has no --moe-backend: selecting {backend} through {sorted(switch.env)}",)


def test_before_0_17_a_backend_without_a_switch_is_a_bug_not_a_silent_auto() -> None:
    # validate_user_backend refuses it for users (tests/entrypoint/test_resolve_cli.py, the KeyError regression)
    with pytest.raises(ValueError, match="marlin cannot be selected on vLLM 0.16.0"):
        render_backend_switch(MoeBackend.MARLIN, OLD)
