"""entrypoint.caches.compile_layer: a baked layer is copied into the run-time caches only when it was made for this
start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.caches import compile_layer as cc
from entrypoint.resolve.plan import Plan

ARGS = ("/opt/ml/model", "--moe-backend", "triton", "--max-num-seqs", "64")


def plan(*extra: str, host: str = "0.0.0.0", port: str = "8080", env: dict[str, str] | None = None) -> Plan:
    return Plan(model="/opt/ml/model", vllm_args=(*ARGS, "--host", host, "--port", port, *extra),
                env=env or {"VLLM_TUNED_CONFIG_FOLDER": "/opt/moe-serving/kernel-configs"})  # fmt: skip


def make_layer(root: Path, made_for: Plan) -> Path:
    layer = root / "layer"
    for folder in cc.CACHE_DIRS:
        (layer / folder / "sub").mkdir(parents=True)
        (layer / folder / "sub" / "artifact.bin").write_bytes(b"x" * 1000)
    cc.write_manifest(layer, made_for, requests=12, seconds=3.0)
    return layer


def run_env(root: Path, layer: Path | None) -> dict[str, str]:
    env = cc.cache_env(root / "run")
    if layer is not None:
        env[cc.LAYER_ENV] = str(layer)
    return env


def test_a_layer_made_for_this_plan_seeds_every_cache_folder(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, plan(host="127.0.0.1", port="41234"))  # where a bake listens is not in the key
    env = run_env(tmp_path, layer)
    line = cc.seed(plan(), env)
    assert line.startswith("compile cache: seeded VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR from")
    for folder, variable in cc.CACHE_DIRS.items():
        assert (Path(env[variable]) / "sub" / "artifact.bin").read_bytes() == b"x" * 1000, folder
    manifest = json.loads((layer / cc.MANIFEST).read_text())
    assert manifest["bake_requests"] == 12 and manifest["folders"]["vllm"] == {"files": 1, "bytes": 1000}


@pytest.mark.parametrize(
    ("start", "why"),
    [
        (plan("--max-model-len", "8192"), "plan "),  # another argv: other shapes, other artifacts
        (plan(env={"VLLM_TUNED_CONFIG_FOLDER": "/elsewhere"}), "plan "),  # another environment
    ],
)
def test_a_layer_made_for_another_plan_is_not_used_and_the_line_says_why(tmp_path: Path, start: Plan, why: str) -> None:
    layer = make_layer(tmp_path, plan())
    env = run_env(tmp_path, layer)
    line = cc.seed(start, env)
    assert line.startswith(f"compile cache: baked layer at {layer} not used: made for {why}")
    assert not Path(env["VLLM_CACHE_ROOT"]).exists()  # nothing copied


def test_a_layer_made_with_other_software_is_not_used(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, plan())
    manifest = json.loads((layer / cc.MANIFEST).read_text())
    manifest["key"]["vllm"] = "0.0.1"
    (layer / cc.MANIFEST).write_text(json.dumps(manifest))
    line = cc.seed(plan(), run_env(tmp_path, layer))
    assert "not used: made for vllm '0.0.1' (this start: " in line


def test_a_cache_already_there_wins_over_the_layer(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, plan())
    env = run_env(tmp_path, layer)
    warm = Path(env["VLLM_CACHE_ROOT"]) / "torch_compile_cache"
    warm.mkdir(parents=True)
    (warm / "mine").write_text("warm")
    line = cc.seed(plan(), env)
    assert "not used: VLLM_CACHE_ROOT=" in line and "already holds a cache, which wins" in line
    assert sorted(p.name for p in warm.iterdir()) == ["mine"]


def test_no_layer_and_a_broken_manifest_each_say_so(tmp_path: Path) -> None:
    assert "is not set" in cc.seed(plan(), run_env(tmp_path, None))
    assert "no baked layer at" in cc.seed(plan(), run_env(tmp_path, tmp_path / "absent"))
    layer = make_layer(tmp_path, plan())
    (layer / cc.MANIFEST).write_text("{")
    assert f"unreadable {cc.MANIFEST}" in cc.seed(plan(), run_env(tmp_path, layer))


def test_secrets_and_where_it_listens_are_not_part_of_the_key_but_a_changed_argument_is_named(tmp_path: Path) -> None:
    base = plan("--api-key", "sk-one")
    assert cc.plan_digest(base) == cc.plan_digest(plan("--api-key=sk-two", host="127.0.0.1", port="1"))
    with_token = {"VLLM_TUNED_CONFIG_FOLDER": "/opt/moe-serving/kernel-configs", "HF_TOKEN": "hf_secret"}
    assert cc.plan_digest(base) == cc.plan_digest(plan(env=with_token))
    layer = make_layer(tmp_path, base)
    assert "sk-one" not in (layer / cc.MANIFEST).read_text()
    line = cc.seed(plan("--max-model-len", "8192"), run_env(tmp_path, layer))
    assert line.endswith("(arguments: --max-model-len 8192)"), line


def test_a_failed_copy_is_undone_and_the_start_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layer = make_layer(tmp_path, plan())
    env = run_env(tmp_path, layer)
    real = cc.shutil.copytree

    def copy_then_fail(src: Path, dst: str, *args: object, **kw: object) -> object:
        if Path(src).name == "triton":  # the last folder: the first two were copied already
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kw)

    monkeypatch.setattr(cc.shutil, "copytree", copy_then_fail)
    line = cc.seed(plan(), env)
    assert "not used: copying it failed" in line and "No space left on device" in line
    assert not any(Path(env[v]).exists() for v in cc.CACHE_DIRS.values())  # nothing half-seeded
