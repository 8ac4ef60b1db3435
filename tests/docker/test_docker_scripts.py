"""The image's build scripts (docker/*.sh), run outside Docker where they can run.

Inside Docker they run in `make image-test FLAVOUR=cpu` (tests/image). Here: shellcheck on every one, and
install_project.sh, aot_cache.sh, healthcheck.sh, flashinfer_jit_cache.sh's refusals and project_requirements.py
for real, outside Docker, where a failure is quicker to read.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels.config_files import config_file_name, write_config_file
from kernels.dispatch import DispatchTable
from kernels.shapes import shape_by_key
from tests.conftest_paths import REPO
from tests.docker.build_context import context_files

DOCKER = REPO / "docker"
SCRIPTS = sorted(DOCKER.glob("*.sh"))
SHELLCHECK = REPO / ".venv" / "bin" / "shellcheck"


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_is_clean(script):
    result = run([str(SHELLCHECK), "--external-sources", "--severity=style", str(script)])
    assert result.returncode == 0, result.stdout


def test_shellcheck_catches_a_planted_bug(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")  # SC2086: unquoted expansion
    result = run([str(SHELLCHECK), str(bad)])
    assert result.returncode != 0 and "SC2086" in result.stdout


def test_project_requirements_prints_pyproject_dependencies():
    result = run([sys.executable, str(DOCKER / "project_requirements.py"), str(REPO / "pyproject.toml")])
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert result.returncode == 0 and result.stdout.splitlines() == expected


def build_context(dest: Path) -> Path:
    """What `docker build` sends (the allowlist the image test checks against Docker itself), copied to dest."""
    for rel in context_files():
        if rel.endswith(".whl"):  # the staged CPU torch wheel: 190 MB the project install does not read
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    return dest


def test_install_project_installs_a_real_package_into_a_scratch_venv(tmp_path):
    src = build_context(tmp_path / "src")
    assert not (src / "tests").exists() and (src / "entrypoint" / "__main__.py").is_file()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # pip, setuptools and the runtime dependencies (pydantic, boto3, ...) come from the dev venv,
    # appended after the scratch venv's own site-packages (the image has them from install_deps.sh);
    # the project itself must come from the scratch install, not the dev venv's editable one.
    scratch_site = Path(
        run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    (scratch_site / "zz_dev_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    prefix = tmp_path / "opt"
    (src / "kernels" / "configs").mkdir(parents=True, exist_ok=True)
    (src / "kernels" / "configs" / "E=8,N=64,device_name=NVIDIA_H200,dtype=fp8_w8a8.json").write_text("{}")

    result = run(["bash", str(DOCKER / "install_project.sh"), str(src), str(prefix)], env={"PYTHON": str(py)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert not src.exists(), "the source tree is removed after the install"
    assert (prefix / "kernel-configs" / "E=8,N=64,device_name=NVIDIA_H200,dtype=fp8_w8a8.json").is_file()
    code = "import entrypoint, sagemaker_deploy; print(entrypoint.__file__)"
    where = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd="/", timeout=60)
    assert where.stdout.strip().startswith(str(scratch_site)), where.stdout + where.stderr
    helped = subprocess.run(
        [str(py), "-m", "entrypoint", "--help"], capture_output=True, text=True, cwd="/", timeout=60
    )
    assert helped.returncode == 0 and "serve" in helped.stdout
    # The resolver's package data (vLLM capability snapshots) came along: plan for the image's vLLM.
    model = REPO / "tests" / "fixtures" / "models" / "qwen3-30b-a3b-fp8-static-synthetic"
    resolve = [str(py), "-m", "entrypoint", "resolve", "--model", str(model), "--gpu", "H200", "--num-gpus", "8",
               "--vllm-version", "0.26.0", "--json"]  # fmt: skip
    resolved = subprocess.run(resolve, capture_output=True, text=True, cwd="/", timeout=60)
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["moe_backend"] == "triton"


@pytest.mark.parametrize(
    ("mode", "rc", "message"), [("skip", 0, "skipped"), ("sometimes", 2, "accepted: compile, skip")]
)
def test_aot_cache_modes(tmp_path, mode, rc, message):
    result = run(["bash", str(DOCKER / "aot_cache.sh"), str(tmp_path / "c"), str(tmp_path)], env={"AOT_MODE": mode})
    assert result.returncode == rc and message in result.stdout + result.stderr


OURS_QWEN3 = {"AOT_OURS_ARGS": "--shapes qwen3-30b-a3b:tp1"}  # our kernel at one shape's table M: ~5 s


def test_aot_cache_with_no_tuned_configs_compiles_only_our_kernel_and_says_so(tmp_path):
    result = run(["bash", str(DOCKER / "aot_cache.sh"), str(tmp_path / "cache"), str(tmp_path / "none")],
                 env={"PYTHON": sys.executable, **OURS_QWEN3})  # fmt: skip
    assert result.returncode == 0 and "no tuned configs" in result.stdout, result.stdout + result.stderr
    assert not list((tmp_path / "cache").rglob("fused_moe_kernel.json"))  # vLLM's kernel: nothing tuned to bake
    # ours at every M of kernels/fused_moe_dispatch.json's Qwen3 row (M = 1 since 2026-12-01c): one GEMM1 binary each
    (qwen,) = [row for row in DispatchTable.load().rows.values() if row.shape == "qwen3-30b-a3b:tp1"]
    table_ms = sum(hi - lo + 1 for lo, hi in qwen.token_ranges)
    assert table_ms >= 1 and len(list((tmp_path / "cache").rglob("moe_gemm1_kernel.json"))) == table_ms
    assert "moe_gemm1_kernel variant(s) of our fused-MoE kernel" in result.stdout


def test_aot_cache_compiles_a_tuned_config_into_a_triton_cache_any_user_reads(tmp_path):
    configs = tmp_path / "configs"
    shape = shape_by_key("qwen3-30b-a3b:tp1")
    tile = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
            "num_stages": 3}  # fmt: skip
    write_config_file(configs / config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape), {1: tile}, "3.6.0")
    cache = tmp_path / "cache"
    result = run(
        ["bash", str(DOCKER / "aot_cache.sh"), str(cache), str(configs)],
        env={"PYTHON": sys.executable, "AOT_ARGS": f"--shapes {shape.key} --batch-sizes 1 --max-tokens 0 --workers 1",
             **OURS_QWEN3},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = list(cache.rglob("fused_moe_kernel.json"))
    assert compiled, result.stdout
    assert all(json.loads(p.read_text())["target"]["arch"] == 90 for p in compiled)  # sm_90, no GPU here
    # Any user reads it (`docker run --user`); nobody but root writes there: new compiles go to /tmp.
    modes = {p.stat().st_mode & 0o777 for p in [cache, *cache.rglob("*")]}
    assert all(mode & 0o444 == 0o444 and mode & 0o022 == 0 for mode in modes), sorted(map(oct, modes))


class _Ping(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/ping" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ping_server() -> Iterator[tuple[http.server.HTTPServer, int]]:
    server = http.server.HTTPServer(("127.0.0.1", 0), type("Ping", (_Ping,), {"status": 200}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, server.server_address[1]
    server.shutdown()


def test_healthcheck_pings_the_port_sagemaker_binds(ping_server):
    server, port = ping_server
    check = ["bash", str(DOCKER / "healthcheck.sh")]
    assert run(check, env={"SAGEMAKER_BIND_TO_PORT": str(port)}).returncode == 0
    server.RequestHandlerClass.status = 503
    assert run(check, env={"SAGEMAKER_BIND_TO_PORT": str(port)}).returncode == 1
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert run(check, env={"SAGEMAKER_BIND_TO_PORT": str(closed)}).returncode == 1


# A process whose /proc/PID/comm is vLLM's engine title, as a headless worker's EngineCore has it (prctl PR_SET_NAME).
FAKE_ENGINE = (
    "import ctypes, sys, time; ctypes.CDLL(None).prctl(15, b'VLLM::EngineCore', 0, 0, 0); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_healthcheck_of_a_headless_worker_looks_for_its_engine_not_ping(ping_server, tmp_path):
    server, port = ping_server
    role = tmp_path / "node-role"
    env = {"SAGEMAKER_BIND_TO_PORT": str(port), "MOE_SERVING_ROLE_FILE": str(role)}
    check = ["bash", str(DOCKER / "healthcheck.sh")]
    server.RequestHandlerClass.status = 503  # a worker has no /ping: whatever answers there does not count
    role.write_text("head\n")
    assert run(check, env=env).returncode == 1  # head and single nodes are judged by /ping
    role.write_text("worker\n")
    # no engine process yet on this machine (none named so), so the worker is not healthy
    others = [p for p in Path("/proc").glob("[0-9]*/comm") if p.read_text(errors="replace").startswith("VLLM::")]
    if not others:
        result = run(check, env=env)
        assert result.returncode == 1 and "no vLLM EngineCore process" in result.stderr
    engine = subprocess.Popen([sys.executable, "-c", FAKE_ENGINE], stdout=subprocess.PIPE, text=True)
    try:
        assert engine.stdout is not None and engine.stdout.readline().strip() == "ready"
        assert run(check, env=env).returncode == 0
    finally:
        engine.kill()
        engine.wait()


@pytest.mark.parametrize("script", ["image_test.sh", "build_image.sh", "install_deps.sh"])
def test_an_unknown_flavour_is_refused_before_anything_runs(script, tmp_path):
    args = ["gpu", str(tmp_path / "pyproject.toml")] if script == "install_deps.sh" else ["gpu", "moe-serving:test"]
    result = run(["bash", str(DOCKER / script), *args], env={"DOCKER": "/nonexistent/docker"})
    assert result.returncode == 2 and "FLAVOUR=gpu is not known; accepted: cuda, cpu" in result.stderr


@pytest.mark.parametrize("script", ["aot_cache.sh", "flashinfer_jit_cache.sh"])
def test_the_cpu_flavour_skips_the_cuda_steps_and_says_so(script, tmp_path):
    result = run(["bash", str(DOCKER / script), str(tmp_path / "out"), str(tmp_path)],
                 env={"FLAVOUR": "cpu", "AOT_MODE": "compile", "FLASHINFER_JIT_CACHE": "compile"})  # fmt: skip
    assert result.returncode == 0 and "skipped for the cpu flavour" in result.stdout, result.stderr
    assert list((tmp_path / "out").iterdir()) == []


# FlashInfer's JIT cache: the compile itself needs nvcc and FlashInfer (the image's final stage; verified by hand
# with the CUDA 13.0 wheels and FlashInfer 0.6.14: sampling for 9.0a built in 108 s on 2 cores, and the
# fresh-process check found "ninja: no work to do." — docs/results/start-time.md). Here: the modes and the refusals.


def test_flashinfer_jit_cache_skip_leaves_a_world_writable_workspace(tmp_path):
    result = run(["bash", str(DOCKER / "flashinfer_jit_cache.sh"), str(tmp_path / "ws")],
                 env={"PYTHON": sys.executable, "FLASHINFER_JIT_CACHE": "skip"})  # fmt: skip
    assert result.returncode == 0 and "skipped" in result.stdout
    assert (tmp_path / "ws").stat().st_mode & 0o777 == 0o777


def test_flashinfer_jit_cache_refuses_an_unknown_mode_or_module(tmp_path):
    mode = run(["bash", str(DOCKER / "flashinfer_jit_cache.sh"), str(tmp_path / "ws")],
               env={"PYTHON": sys.executable, "FLASHINFER_JIT_CACHE": "yes"})  # fmt: skip
    assert mode.returncode == 2 and "FLASHINFER_JIT_CACHE='yes'; accepted: compile, skip" in mode.stderr
    module = run([sys.executable, str(DOCKER / "flashinfer_jit_cache.py"), "--workspace", str(tmp_path / "ws"),
                  "--modules", "sampling,attention"], env={})  # fmt: skip
    accepted = "accepted: ['fused_moe_90', 'sampling', 'trtllm_utils']"
    assert module.returncode == 2 and f"unknown ['attention']; {accepted}" in module.stderr
