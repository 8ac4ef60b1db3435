"""Start, stop and die: what SageMaker does to a container, on servers of their own.

- `make run`'s path (run-local) starts and answers /ping; the time is what the README quotes.
- SIGTERM with streams open: every client gets a complete answer or a clean final error line,
  and the process is gone within SageMaker's 30 s.
- The engine process dies: the server exits non-zero (no supervisor restarts it; the container
  exits and SageMaker replaces it) and /ping stops answering 200.
- An FP8 checkpoint on the CPU engine is refused at start, exit code 2, with a clear message.
- The harness itself: a server that never gets ready, or that a dying test never stopped, is
  stopped anyway (it runs in its own session and would otherwise outlive pytest).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tools import local_server
from tools.local_server import CPU_ENV, REPO, Server, free_port, is_final_or_error, open_lmi_streams

SAGEMAKER_STOP_GRACE_S = 30.0


def test_run_local_then_sigterm_with_open_streams(tiny_model: Path, tmp_path: Path) -> None:
    server = Server(["run-local"], tmp_path / "run-local.log", env={"MOE_SERVING_TINY_MODEL_DIR": str(tiny_model)})
    try:
        server.start()
        print(f"run-local: first /ping 200 after {server.started_in_s:.1f} s")
        assert server.proc is not None

        async def scenario() -> tuple[list[tuple[list[dict[str, Any]], str | None]], float]:
            started = asyncio.Event()
            streams = asyncio.ensure_future(
                open_lmi_streams(server.url, 8, started, max_new_tokens=480, timeout_s=SAGEMAKER_STOP_GRACE_S + 10)
            )
            await asyncio.wait_for(started.wait(), timeout=60)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            results = await streams
            while server.proc.poll() is None and time.monotonic() - signalled < SAGEMAKER_STOP_GRACE_S + 5:
                await asyncio.sleep(0.1)
            return results, time.monotonic() - signalled

        results, exit_after = asyncio.run(scenario())
        assert server.proc.poll() is not None, "server still running after SIGTERM"
        assert exit_after < SAGEMAKER_STOP_GRACE_S, f"exited {exit_after:.1f} s after SIGTERM"
        for lines, transport_error in results:
            assert transport_error is None, f"stream cut without a final line: {transport_error}"
            assert lines and is_final_or_error(lines[-1]), f"last line is neither an answer nor an error: {lines[-1:]}"
            assert all("token" in line for line in lines[:-1])
    finally:  # also when an assertion failed mid-way: a live server would eat the cores of later tests
        server.stop()


def test_engine_death_stops_the_server_and_ping(tiny_model: Path, tmp_path: Path) -> None:
    server = Server(["serve", "--model", str(tiny_model), "--host", "127.0.0.1"], tmp_path / "serve.log")
    try:
        server.start()
        engines = server.engine_pids()
        assert engines, "expected vLLM's EngineCore child process"
        assert server.proc is not None
        os.kill(engines[0], signal.SIGKILL)
        killed = time.monotonic()
        last_ok: float | None = None
        while server.proc.poll() is None and time.monotonic() - killed < SAGEMAKER_STOP_GRACE_S:
            try:
                if httpx.get(server.url + "/ping", timeout=2).status_code == 200:
                    last_ok = time.monotonic() - killed
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        code = server.stop()
        assert server.proc.returncode is not None and time.monotonic() - killed < SAGEMAKER_STOP_GRACE_S + 12
        assert code != 0, "the container must exit non-zero when its engine dies"
        # The middleware sees the engine process gone at once (entrypoint/lmi/engine_processes.py):
        # no 200 after the kill.
        assert last_ok is None, f"/ping answered 200 {last_ok:.2f} s after the engine died"
    finally:
        server.stop()


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_server_that_never_answers_ping_is_stopped_before_the_error(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_server, "START_DEADLINE_S", 1.0)  # vLLM cannot even be imported in 1 s
    server = Server(["serve", "--model", str(tiny_model), "--host", "127.0.0.1"], tmp_path / "slow.log")
    with pytest.raises(AssertionError, match="no /ping 200 within 1 s"):
        server.start()
    assert server.proc is not None
    if server.proc.poll() is None or _group_alive(server.proc.pid):
        os.killpg(server.proc.pid, signal.SIGKILL)  # leave nothing behind even when the check fails
        pytest.fail("the timed-out server (or a process of its group) is still running")


def test_servers_nobody_stopped_are_stopped_when_python_exits(tiny_model: Path, tmp_path: Path) -> None:
    # What a test that dies before its teardown leaves: a launched server, then the interpreter exits.
    script = (
        "import sys; from pathlib import Path; from tools.local_server import Server; "
        "s = Server(['serve', '--model', sys.argv[1]], Path(sys.argv[2])).launch(); print(s.proc.pid)"
    )
    argv = [sys.executable, "-c", script, str(tiny_model), str(tmp_path / "orphan.log")]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    if _group_alive(pid):  # leave nothing behind even when the check below fails
        os.killpg(pid, signal.SIGKILL)
        pytest.fail("the server launched by a process that exited is still running")


def test_fp8_checkpoint_on_the_cpu_engine_is_refused_at_start(tiny_model: Path, tmp_path: Path) -> None:
    config = json.loads((tiny_model / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
    }
    model = tmp_path / "fp8-moe"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, "-m", "entrypoint", "serve", "--model", str(model), "--port", str(free_port())]
    done = subprocess.run(argv, cwd=REPO, env={**os.environ, **CPU_ENV}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "fp8" in done.stderr and "CPU" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("port", ["0", "http", "70000"])
def test_bad_port_is_refused_with_exit_2(port: str, tiny_model: Path) -> None:
    env = {**os.environ, **CPU_ENV, "SAGEMAKER_BIND_TO_PORT": port}
    argv = [sys.executable, "-m", "entrypoint", "serve", "--model", str(tiny_model)]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "SAGEMAKER_BIND_TO_PORT" in done.stderr, done.stderr


# A worker node (option.node_role=worker): vLLM headless, no API server, no middleware. Its engine starts and waits for
# the head's handshake; no head is needed to see how the process ends.
def _headless_worker(model: Path, log: Path) -> subprocess.Popen[bytes]:
    args = ["--dtype", "bfloat16", "--max-model-len", "256", "--enforce-eager", "--headless",
            "--data-parallel-size", "2", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "1",
            "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(free_port())]  # fmt: skip
    env = {**os.environ, **CPU_ENV, "VLLM_CPU_OMP_THREADS_BIND": "0"}
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "entrypoint.serve", "serve", str(model), *args], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


@pytest.mark.parametrize(("what", "expected_code"), [("engine killed", 3), ("SIGTERM", 0)])
def test_a_headless_worker_exits_non_zero_only_when_its_engine_died(
    tiny_model: Path, tmp_path: Path, what: str, expected_code: int
) -> None:
    log = tmp_path / "worker.log"
    worker = _headless_worker(tiny_model, log)
    try:
        deadline = time.monotonic() + 120
        while not (engines := local_server.engine_core_children(worker.pid)) and time.monotonic() < deadline:
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        assert engines, log.read_text()[-3000:]
        signalled = time.monotonic()
        if what == "engine killed":
            os.kill(engines[0], signal.SIGKILL)
        else:
            worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=30)
        print(f"headless worker, {what}: exit {code} after {time.monotonic() - signalled:.1f} s")
        assert code == expected_code, log.read_text()[-3000:]
        died = "error: a headless worker's engine exited without a stop signal" in log.read_text()
        assert died == (expected_code != 0)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
