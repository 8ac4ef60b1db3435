"""entrypoint.bake_cache.wait_ready: the one /health wait of the bake, the served benchmark and the logits check.

Each case starts a real process: one that serves /health, one that dies, one that listens to nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from entrypoint.bake_cache import ServerNotReady, wait_ready
from entrypoint.utils.errors import ConfigError
from tools.local_server import free_port

HEALTHY_AFTER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def start(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv])


def test_it_returns_once_health_answers_200() -> None:
    port = free_port()
    server = start("-c", HEALTHY_AFTER, str(port), "0.6")
    try:
        seconds = wait_ready(server, port, time.time() + 30)
        assert 0.5 < seconds < 30
    finally:
        server.kill()
        server.wait()


def test_a_server_that_exits_is_named_with_its_exit_code() -> None:
    server = start("-c", "import sys; sys.exit(3)")
    with pytest.raises(ServerNotReady, match="the server exited with 3 before /health answered 200"):
        wait_ready(server, free_port(), time.time() + 30)


def test_a_server_that_never_answers_runs_out_at_the_deadline() -> None:
    server = start("-c", "import time; time.sleep(60)")
    t0 = time.perf_counter()
    try:
        with pytest.raises(ServerNotReady, match=r"no /health 200 within 1 s"):
            wait_ready(server, free_port(), time.time() + 1.0)
        assert time.perf_counter() - t0 < 5
    finally:
        server.kill()
        server.wait()


def test_an_unfinished_bake_loses_its_partial_caches_and_keeps_the_tune(tmp_path: Path) -> None:
    from entrypoint.bake_cache import bake
    from entrypoint.resolve.plan import Plan

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "partial").write_text("x")
    (tmp_path / "tuned").mkdir()
    (tmp_path / "tuned" / "provenance.json").write_text("{}")
    (tmp_path / "tune-state.jsonl").write_text("")
    with pytest.raises(ValueError, match="listens on 127.0.0.1"):  # stops before any server: no --host here
        bake(Plan(model="m", vllm_args=("m",)), tmp_path, 1.0)
    assert not (tmp_path / "vllm").exists()
    assert (tmp_path / "tuned" / "provenance.json").exists() and (tmp_path / "tune-state.jsonl").exists()
    (tmp_path / "manifest.json").write_text("{}")  # a finished layer is never touched
    with pytest.raises(ConfigError, match="a finished layer"):
        bake(Plan(model="m", vllm_args=("m",)), tmp_path, 1.0)
