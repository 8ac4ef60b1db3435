"""The embedded tiny MoE: the Qwen3-MoE shape the recipe asks for, and byte-identical regeneration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from entrypoint.model.tiny_model import ensure_tiny_model, generate, is_complete, tree_digest
from tests.conftest_paths import REPO


def test_regeneration_is_byte_identical_and_has_the_recipe_shape(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    generate(first)
    generate(second)
    assert tree_digest(first) == tree_digest(second)

    config = json.loads((first / "config.json").read_text())
    assert config["model_type"] == "qwen3_moe" and config["architectures"] == ["Qwen3MoeForCausalLM"]
    assert (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"]) == (512, 128, 2)
    assert config.get("num_experts", config.get("num_local_experts")) == 8 and config["num_experts_per_tok"] == 2
    assert (first / "model.safetensors").stat().st_size < 2_000_000
    assert "option.max_model_len=512" in (first / "serving.properties").read_text()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(first)
    assert len(tokenizer) == 512 and tokenizer.eos_token == "<|im_end|>"
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_ensure_keeps_a_complete_copy_and_replaces_an_incomplete_one(tmp_path: Path) -> None:
    dest = tmp_path / "tiny"
    dest.mkdir()
    (dest / "leftover").write_text("interrupted run")
    ensure_tiny_model(dest)
    assert is_complete(dest) and not (dest / "leftover").exists()
    stamp = (dest / "model.safetensors").stat().st_mtime_ns
    ensure_tiny_model(dest)
    assert (dest / "model.safetensors").stat().st_mtime_ns == stamp  # not regenerated


# Each caller imports torch and transformers first, then waits for the go file so that all of them
# call ensure_tiny_model within milliseconds of each other (generation itself takes ~1 s).
_CONCURRENT_CALLER = """
import os, sys, time
from pathlib import Path
import torch, transformers  # noqa: F401  (imported before the start so the calls overlap)
from entrypoint.model.tiny_model import ensure_tiny_model, is_complete
dest, go = Path(sys.argv[1]), Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
path = ensure_tiny_model(dest)
print(os.stat(path).st_ino, is_complete(path), flush=True)
"""


def test_callers_at_once_share_one_copy_that_nobody_replaces(tmp_path: Path) -> None:
    dest, go = tmp_path / "tiny", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    callers = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT_CALLER, str(dest), str(go)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for _ in range(3)
    ]
    for caller in callers:
        assert caller.stdout is not None and caller.stdout.readline().strip() == "ready"
    go.touch()
    answers = [caller.communicate(timeout=300)[0].split() for caller in callers]
    assert [caller.returncode for caller in callers] == [0, 0, 0]
    # One generation: every caller returned the same directory (one inode), complete, and it is still there.
    assert {inode for inode, _ in answers} == {str(os.stat(dest).st_ino)}
    assert all(complete == "True" for _, complete in answers)
    assert is_complete(dest)
