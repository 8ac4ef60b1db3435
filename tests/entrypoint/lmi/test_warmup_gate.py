"""The warm-up gate inside vLLM's server: the child's argv from the server's own, and /ping held exactly while a real
child process runs, released when it exits 0, fails or overruns its time."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator

import pytest

from entrypoint.lmi.warmup_gate import QuietWarmupRequests, WarmupGate, logger, timeout_s, warmup_command
from entrypoint.warmup import DEFAULT_TIMEOUT_S, HEADER, MAX_SAMPLED_BATCH_ENV, TIMEOUT_ENV, WARMUP_ENV

SERVER_ARGV = ["vllm", "serve", "/opt/ml/model", "--max-model-len", "4096", "--max-num-seqs=64", "--api-key",
               "s3cret", "--host", "0.0.0.0", "--port", "8080", "--middleware",
               "entrypoint.lmi.middleware.LMIMiddleware"]  # fmt: skip


def test_the_child_gets_the_model_port_and_limits_of_the_server_and_never_its_secrets():
    command, why = warmup_command(SERVER_ARGV, {MAX_SAMPLED_BATCH_ENV: "8"}, python="py")
    assert command == ["py", "-m", "entrypoint.warmup", "--model", "/opt/ml/model", "--host", "127.0.0.1", "--port",
                       "8080", "--timeout", str(DEFAULT_TIMEOUT_S), "--max-model-len", "4096", "--max-num-seqs", "64",
                       "--max-sampled-batch", "8"]  # fmt: skip
    assert why == "" and "s3cret" not in command
    # vLLM's own default port when the argv has none, the server's own address when it is not every interface's
    default, _ = warmup_command(["vllm", "serve", "m"], {}, python="py")
    assert default is not None and default[5:9] == ["--host", "127.0.0.1", "--port", "8000"]
    one, _ = warmup_command(["vllm", "serve", "m", "--host", "10.1.2.3"], {}, python="py")
    assert one is not None and one[5:7] == ["--host", "10.1.2.3"]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["vllm", "serve", "--help"], "the server's argv names no model"),
        (["python"], "the server's argv names no model"),
        (["vllm", "serve", "m", "--uds", "/tmp/s"], "plain HTTP on TCP does not reach it (--uds)"),
        (["vllm", "serve", "m", "--ssl-keyfile=k", "--ssl-certfile", "c"], "(--ssl-keyfile, --ssl-certfile)"),
    ],
)
def test_no_warmup_where_the_child_could_not_reach_the_server(argv: list[str], why: str):
    command, said = warmup_command(argv, {})
    assert command is None and why in said


class Said(logging.Handler):
    """The gate's lines, caught on its own logger (vLLM's tree does not propagate to the root's capture)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def said() -> Iterator[Said]:
    handler, level = Said(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_time_limit_comes_from_the_environment_and_a_bad_one_is_said(said: Said):
    assert timeout_s({TIMEOUT_ENV: "30"}) == 30.0 and timeout_s({}) == DEFAULT_TIMEOUT_S
    assert timeout_s({TIMEOUT_ENV: "soon"}) == DEFAULT_TIMEOUT_S
    # never an endless hold, even where the start's check (entrypoint.config.settings) did not run
    assert timeout_s({TIMEOUT_ENV: "inf"}) == timeout_s({TIMEOUT_ENV: "nan"}) == DEFAULT_TIMEOUT_S
    assert "MOE_WARMUP_TIMEOUT_S='soon' is not a number of seconds" in said.text


async def _hold_times(gate: WarmupGate, command: list[str], poll_s: float = 0.05) -> tuple[bool, float]:
    """Run the gate on `command`; (held right after start, seconds until released)."""
    gate.enabled, gate.holding = True, True
    task = asyncio.get_running_loop().create_task(gate._run(command))
    await asyncio.sleep(poll_s)
    held = gate.holding
    t0 = asyncio.get_running_loop().time()
    await task
    return held, asyncio.get_running_loop().time() - t0


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    ("code", "line"),
    [
        ("import time; time.sleep(0.5)", "warm-up: done after"),
        ("import sys, time; time.sleep(0.5); sys.exit(1)", "warm-up: failed (exit status 1) after"),
    ],
    ids=["answered", "failed"],
)
def test_ping_is_held_while_the_child_runs_and_released_when_it_exits(code: str, line: str, said: Said):
    gate = WarmupGate(environ={WARMUP_ENV: "on"}, argv=SERVER_ARGV)
    held, released_after = asyncio.run(_hold_times(gate, child(code)))
    assert held and not gate.holding and 0.2 < released_after < 5
    assert line in said.text


def test_a_child_past_its_time_is_killed_and_ping_released(said: Said):
    gate = WarmupGate(environ={WARMUP_ENV: "on", TIMEOUT_ENV: "0.5"}, argv=SERVER_ARGV)
    held, released_after = asyncio.run(_hold_times(gate, child("import time; time.sleep(60)")))
    assert held and not gate.holding and released_after < 5
    assert "warm-up: not done after 0.5 s (MOE_WARMUP_TIMEOUT_S); serving without it" in said.text
    assert gate._child is not None and gate._child.returncode is not None  # killed and reaped


def test_without_the_plans_on_nothing_starts_and_nothing_is_held():
    for value in ("off", "", "yes"):
        gate = WarmupGate(environ={WARMUP_ENV: value}, argv=SERVER_ARGV)
        gate.start()  # no running loop needed: it returns before scheduling anything
        assert not gate.enabled and not gate.holding


def access_line(client: str) -> logging.LogRecord:
    """uvicorn's access record (protocols/http: '%s - "%s %s HTTP/%s" %d' with get_client_addr first)."""
    args = (client, "POST", "/invocations", "1.1", 200)
    return logging.LogRecord("uvicorn.access", logging.INFO, "h11_impl.py", 1, '%s - "%s %s HTTP/%s" %d', args, None)


def test_the_warmups_own_requests_leave_the_access_log_and_nothing_else_does():
    quiet = QuietWarmupRequests()
    quiet.note({"client": ("127.0.0.1", 5000), "headers": [(HEADER.lower().encode(), b"1")]})
    quiet.note({"client": ("127.0.0.1", 5001), "headers": [(b"content-type", b"application/json")]})
    assert not quiet.filter(access_line("127.0.0.1:5000"))  # the warm-up's request: dropped
    assert quiet.filter(access_line("127.0.0.1:5000"))  # once only: a later client on the same port is logged
    assert quiet.filter(access_line("127.0.0.1:5001"))  # a user's request during the warm-up is logged
