"""option.hf_token reaches the hub client when the resolver reads a private repository's configs, against the real
`huggingface_hub` client and a private repository served on 127.0.0.1 (tests/private_hub.py). The option used to
reach vLLM only (as HF_TOKEN: vLLM downloads hub models itself); the resolver's read went out without it and refused
a private model before vLLM ever ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.inputs.gather import build_plan
from entrypoint.serve import plan_log_lines
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import FIXTURE_MODELS
from tests.private_hub import private_hub

REPO_ID = "acme/private-moe"
TOKEN = "hf_" + "p" * 34
NEMOTRON = FIXTURE_MODELS / "nvidia-nemotron-3-nano-30b-a3b-fp8"
FILES = {name: (NEMOTRON / name).read_bytes() for name in ("config.json", "hf_quant_config.json")}


@pytest.fixture(autouse=True)
def no_token_of_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub client falls back to the process's HF_TOKEN and the stored token file when given none: on a machine
    with a token, that real token would reach the test hub (which records only whether a token was the repository's)."""
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read once at import: a machine's global setting


def _environ(tmp_path: Path, endpoint: str) -> dict[str, str]:
    """A fresh hub cache, the test hub as HF_ENDPOINT, no HF_TOKEN."""
    return {"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(tmp_path / "hub-cache")}


def _properties(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "serving.properties"
    path.write_text("".join(f"{line}\n" for line in (f"option.model_id={REPO_ID}", *lines)))
    return path


def _plan(tmp_path: Path, endpoint: str, *lines: str):
    return build_plan(properties=_properties(tmp_path, *lines), gpu="H200", num_gpus=1, vllm_version="0.32.0",
                      environ=_environ(tmp_path, endpoint))  # fmt: skip


def test_option_hf_token_reads_a_private_repositorys_configs_and_is_never_shown(tmp_path: Path) -> None:
    with private_hub(REPO_ID, TOKEN, FILES) as hub:
        plan = _plan(tmp_path, hub.endpoint, f"option.hf_token={TOKEN}")
    assert plan.model == REPO_ID
    assert any("nemotron" in line.lower() or "modelopt" in line.lower() for line in plan.reasons), plan.reasons
    assert hub.seen_tokens and set(hub.seen_tokens) == {"token"}  # every request carried the option's token
    assert TOKEN not in "\n".join(plan_log_lines(plan))
    assert plan.env["HF_TOKEN"] == TOKEN  # and vLLM, which downloads the weights, gets it too


def test_without_the_token_a_private_repository_is_refused_naming_both_ways_to_give_it(tmp_path: Path) -> None:
    with private_hub(REPO_ID, TOKEN, FILES) as hub, pytest.raises(ConfigError) as info:
        _plan(tmp_path, hub.endpoint)
    assert info.value.key == "option.model_id"
    assert "set option.hf_token or HF_TOKEN" in str(info.value)
    assert hub.seen_tokens and set(hub.seen_tokens) == {None}  # no token at all reached the hub


def test_the_option_beats_a_stale_hf_token_in_the_environment(tmp_path: Path) -> None:
    with private_hub(REPO_ID, TOKEN, FILES) as hub:
        plan = build_plan(properties=_properties(tmp_path, f"option.hf_token={TOKEN}"), gpu="H200", num_gpus=1,
                          vllm_version="0.32.0",
                          environ={**_environ(tmp_path, hub.endpoint), "HF_TOKEN": "hf_stale"})  # fmt: skip
    assert plan.model == REPO_ID and set(hub.seen_tokens) == {"token"}  # never the stale one
