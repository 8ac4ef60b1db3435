"""Start and stop the real serving path (`python -m entrypoint ...` → vLLM CPU engine) on this machine.

Shared by the end-to-end tests (tests/e2e), the container tests (tests/image: ``free_port``,
``engine_core_children``) and the middleware benchmark (benchmarks/serving/bench_middleware.py), so all of them
start, wait for and stop a server the same way. Not shipped: the image starts its server with its ENTRYPOINT.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from entrypoint.lmi.engine_processes import engine_children
from entrypoint.run_local import CPU_ENV_DEFAULTS
from entrypoint.utils.ports import free_port

REPO = Path(__file__).resolve().parents[1]
# A 2-core machine shared with other jobs: vLLM's start is 12-35 s here, give it room.
START_DEADLINE_S = float(os.environ.get("E2E_START_DEADLINE_S", "240"))
# The CPU engine's settings `make run` uses, set here whatever the caller's environment says.
CPU_ENV = CPU_ENV_DEFAULTS

STARTED: list[Server] = []  # every server of this session: the failure report hook, stop_all at exit


def engine_core_children(pid: int) -> list[int]:
    """PIDs of vLLM EngineCore processes among ``pid``'s children: the middleware's own lookup
    (entrypoint/lmi/engine_processes.py), so a test kills exactly what the server watches."""
    return sorted(engine_children(pid))


@dataclass
class Server:
    """One `python -m entrypoint <command>` process, its port and its log file."""

    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    started_in_s: float | None = None
    stopped: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> Server:
        """Start the process without waiting for it (start() waits; stop_all() stops it at exit at the latest)."""
        env = {**os.environ, **CPU_ENV, **self.env, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "entrypoint", *self.args, "--port", str(self.port)]
        self._log = self.log_path.open("wb")
        self._began = time.monotonic()
        # Own process group: teardown can stop vLLM's engine child too, even if the server hangs.
        self.proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        STARTED.append(self)
        return self

    def start(self) -> Server:
        """Launch and wait for /ping 200; a server that never gets there is stopped before the error rises.

        (It runs in its own session, so nothing else would stop it: it would outlive pytest and take the
        machine's cores from every later test.)
        """
        for attempt in range(3):
            self.launch()
            try:
                self.wait_ready(self._began)
                break
            except BaseException:
                self.stop()
                # free_port() releases the port before vLLM binds it: another process may take it in between.
                if attempt == 2 or "address already in use" not in self.log_tail().lower():
                    raise
                self.port, self.stopped = free_port(), False
        self.started_in_s = time.monotonic() - self._began
        return self

    def wait_ready(self, began: float) -> None:
        assert self.proc is not None
        while time.monotonic() - began < START_DEADLINE_S:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode} before /ping:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/ping", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"no /ping 200 within {START_DEADLINE_S:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def engine_pids(self) -> list[int]:
        """PIDs of the server's vLLM EngineCore children."""
        assert self.proc is not None
        return engine_core_children(self.proc.pid)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL to the whole group after 30 s; the exit status. Calling it again is harmless."""
        if self.proc is None:
            return None
        if self.stopped:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Leftovers of the group (an orphaned engine) must not outlive the test.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        self.stopped = True
        return self.proc.returncode


def stop_all() -> None:
    """Stop every server of this process not stopped yet: a test that failed before its own stop()
    (or a fixture whose teardown never ran) must not leave vLLM running after pytest exits."""
    for server in STARTED:
        server.stop()


atexit.register(stop_all)


StreamOutcome = tuple[list[dict[str, Any]], str | None]  # the JSON lines a client got, and its transport error


def is_final_or_error(line: dict[str, Any]) -> bool:
    """The last line of an LMI stream: the one with generated_text, or an error line {code, error}."""
    return line.get("generated_text") is not None or set(line) == {"code", "error"}


async def open_lmi_streams(
    url: str,
    count: int,
    started: asyncio.Event,
    *,
    max_new_tokens: int,
    timeout_s: float,
    headers: dict[str, str] | None = None,
) -> list[StreamOutcome]:
    """`count` LMI jsonlines streams on /invocations, long enough to be open when a stop arrives; `started` is set
    at the first line any of them gets. Each client's lines and its transport error (None: the stream ended)."""

    async def one(client: httpx.AsyncClient, i: int) -> StreamOutcome:
        lines: list[dict[str, Any]] = []
        body = {"inputs": f"long story {i}", "parameters": {"max_new_tokens": max_new_tokens, "ignore_eos_token": True},
                "stream": True}  # fmt: skip
        try:
            async with client.stream("POST", "/invocations", json=body) as response:
                async for raw in response.aiter_lines():
                    if raw.strip():
                        lines.append(json.loads(raw))
                        started.set()
        except httpx.HTTPError as exc:
            return lines, repr(exc)
        return lines, None

    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, headers=headers) as client:
        return await asyncio.gather(*(one(client, i) for i in range(count)))
