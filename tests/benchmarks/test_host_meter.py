"""benchmarks.e2e.host_meter against real parts: a process tree of this machine read from /proc, and Prometheus text
served over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.e2e import host_meter

# a server process whose child (the "engine") keeps one thread busy until killed, as vLLM's engine core under the API
# server
SERVER = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "while True: pass"])
"""


METRICS = """# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 250.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.75
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 250.0
vllm:inter_token_latency_seconds_sum{engine="1",model_name="m"} 0.25
vllm:inter_token_latency_seconds_count{engine="1",model_name="m"} 50.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 9.0
"""


def test_the_busy_engine_thread_under_the_server_is_measured() -> None:
    """The meter's engine figures are the busy child's own ticks over the window (checked against its /proc stat read
    independently), and the server, which only waits, spends next to nothing: no wall-clock threshold, so a loaded
    CI machine cannot fail it."""
    server = subprocess.Popen([sys.executable, "-c", SERVER])
    try:
        deadline = time.monotonic() + 10
        while not host_meter.descendants(server.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (engine,) = host_meter.descendants(server.pid)
        meter = host_meter.BatchMeter(server.pid, port=1)  # no /metrics there: the CPU fields only
        before = sum(host_meter.thread_ticks(engine).values())
        meter.start()
        time.sleep(1.0)
        fields = meter.stop()
        after = sum(host_meter.thread_ticks(engine).values())
    finally:
        for pid in host_meter.descendants(server.pid):
            os.kill(pid, signal.SIGKILL)
        server.wait(timeout=30)
    assert set(fields) == {"api_cpu_s", "engine_cpu_s", "engine_top_thread_cpu_s"}
    tick = 1 / host_meter.CLOCK_TICKS
    assert 0 < fields["engine_top_thread_cpu_s"] == pytest.approx(fields["engine_cpu_s"], abs=2 * tick)
    assert fields["engine_cpu_s"] <= (after - before) * tick + 2 * tick, fields
    assert fields["api_cpu_s"] <= fields["engine_cpu_s"], fields  # the server itself waits


def test_histogram_totals_add_every_label_set() -> None:
    assert host_meter.parse_histogram_totals(METRICS, host_meter.ITL_METRIC) == (1.0, 300)
    assert host_meter.parse_histogram_totals(METRICS, "vllm:e2e_request_latency_seconds") is None


@pytest.fixture
def metrics_port() -> Iterator[int]:
    scrapes = [0]

    class Handler(BaseHTTPRequestHandler):
        """Each scrape finds 100 more tokens and 0.5 s more latency on engine 1, as if a batch ran in between."""

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            n, scrapes[0] = scrapes[0], scrapes[0] + 1
            body = METRICS.replace("} 0.25", f"}} {0.25 + 0.5 * n}").replace("} 50.0", f"}} {50 + 100 * n}.0")
            body = body.encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_engines_itl_over_a_batch_is_the_difference_of_two_scrapes(metrics_port: int) -> None:
    meter = host_meter.BatchMeter(None, metrics_port)
    meter.start()
    fields = meter.stop()
    assert fields == {"server_itl_sum_s": pytest.approx(0.5), "server_itl_count": 100}
    assert host_meter.itl_totals(metrics_port) == (2.0, 500)  # the third scrape: both engines' series


def test_a_server_without_metrics_gives_no_itl_fields() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]
    assert host_meter.itl_totals(port, timeout_s=2) is None
    meter = host_meter.BatchMeter(None, port)
    meter.start()
    assert meter.stop() == {}
