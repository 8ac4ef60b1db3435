"""entrypoint.bake_cache.wait_ready: the one /health wait of the bake, the served benchmark and the logits check.

Each case starts a real process: one that serves /health, one that dies, one that listens to nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from entrypoint.bake_cache import ServerNotReady, wait_ready
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
