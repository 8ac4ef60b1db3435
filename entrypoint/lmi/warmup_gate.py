"""The warm-up at server start (option.warmup): start entrypoint.warmup, hold /ping and /health at 503 until it ends.

The middleware lives in vLLM's API server process, so it reads the server's own argv (vLLM's CLI runs in-process:
entrypoint.serve.run_vllm_cli) for the model and the port, and starts the warm-up as a child process, whose blocking
HTTP clients never share this event loop. The hold ends when the child exits, whatever its status, or after
MOE_WARMUP_TIMEOUT_S: a failed or slow warm-up is logged, and the server serves cold rather than not at all.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from entrypoint.utils.argv import flag_value
from entrypoint.warmup import DEFAULT_TIMEOUT_S, HEADER, MAX_SAMPLED_BATCH_ENV, TIMEOUT_ENV, WARMUP_ENV

# A child of vLLM's logger, which vLLM gives its handler and format in its server process: an INFO line of a logger
# outside that tree would be dropped there (Python's last-resort handler takes warnings only).
logger = logging.getLogger("vllm.moe_serving_warmup")
VLLM_DEFAULT_PORT = "8000"
ACCESS_LOGGER = "uvicorn.access"
_HEADER_KEY = HEADER.lower().encode("latin-1")


class QuietWarmupRequests(logging.Filter):
    """Leaves the warm-up's requests out of uvicorn's access log: the middleware notes the client address of each
    request that carries the warm-up's header, and uvicorn's access line, whose first argument is that address
    ("127.0.0.1:56220", uvicorn's get_client_addr), is dropped once. Every other line passes untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.clients: set[str] = set()

    def note(self, scope: Mapping[str, Any]) -> None:
        client = scope.get("client")
        if client and any(name == _HEADER_KEY for name, _ in scope.get("headers", ())):
            self.clients.add(f"{client[0]}:{client[1]}")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args and str(args[0]) in self.clients:
            self.clients.discard(str(args[0]))
            return False
        return True


# Where the child cannot reach the server over plain TCP: a Unix socket, TLS.
UNREACHABLE_FLAGS = ("--uds", "--ssl-keyfile", "--ssl-certfile")
# Addresses that mean "every interface": the child reaches them on the loopback.
ANY_HOST = ("", "0.0.0.0", "::", "[::]")


def warmup_command(
    argv: Sequence[str], environ: Mapping[str, str], python: str = sys.executable, limit: float = DEFAULT_TIMEOUT_S
) -> tuple[list[str] | None, str]:
    """(the warm-up's argv for a server started as `vllm serve MODEL ...`, "") or (None, why there is none)."""
    args = list(argv[argv.index("serve") + 1 :]) if "serve" in argv else []
    if not args or args[0].startswith("-"):
        return None, f"the server's argv names no model: {' '.join(argv[:3])}"
    unreachable = [flag for flag in UNREACHABLE_FLAGS if flag_value(args, flag) is not None]
    if unreachable:
        return None, f"the server listens where plain HTTP on TCP does not reach it ({', '.join(unreachable)})"
    host = flag_value(args, "--host") or ""
    port = flag_value(args, "--port") or VLLM_DEFAULT_PORT
    command = [python, "-m", "entrypoint.warmup", "--model", args[0], "--host",
               "127.0.0.1" if host in ANY_HOST else host, "--port", port,
               "--timeout", str(limit)]  # fmt: skip
    for flag in ("--max-model-len", "--max-num-seqs"):
        value = flag_value(args, flag)
        if value is not None and value.isdigit():
            command += [flag, value]
    if environ.get(MAX_SAMPLED_BATCH_ENV, "").isdigit():
        command += ["--max-sampled-batch", environ[MAX_SAMPLED_BATCH_ENV]]
    return command, ""


def timeout_s(environ: Mapping[str, str]) -> float:
    text = environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        logger.warning("%s=%r is not a number of seconds; the warm-up waits %.0f s at most", TIMEOUT_ENV, text,
                       DEFAULT_TIMEOUT_S)  # fmt: skip
        return DEFAULT_TIMEOUT_S
    # `serve` refuses a value that is not a finite number > 0 (entrypoint.config.settings); a server started
    # otherwise still never waits forever on `inf`
    return value if math.isfinite(value) and value > 0 else DEFAULT_TIMEOUT_S


class WarmupGate:
    """Whether /ping is held for the warm-up; `start` at lifespan startup, `stop` at shutdown."""

    def __init__(self, environ: Mapping[str, str] | None = None, argv: Sequence[str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.argv = list(sys.argv if argv is None else argv)
        self.enabled = self.environ.get(WARMUP_ENV) == "on"
        self.limit = timeout_s(self.environ) if self.enabled else DEFAULT_TIMEOUT_S
        self.holding = False
        self._child: subprocess.Popen[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self.quiet = QuietWarmupRequests()

    def start(self) -> None:
        if not self.enabled:
            return
        command, why = warmup_command(self.argv, self.environ, limit=self.limit)
        if command is None:
            logger.warning("warm-up: skipped (%s); serving without it", why)
            return
        self.holding = True
        logging.getLogger(ACCESS_LOGGER).addFilter(self.quiet)
        self._task = asyncio.get_running_loop().create_task(self._run(command))

    async def _run(self, command: list[str]) -> None:
        t0, limit = time.perf_counter(), self.limit
        # vLLM 0.32's jit_monitor calls every Triton compile after its own start "JIT compilation during inference"
        # and suggests a longer warm-up: the compiles this warm-up triggers are logged so (2026-12-05c, an H100)
        logger.info("warm-up: started; /ping and /health answer 503 until it ends (at most %g s); vLLM's 'JIT "
                    "compilation during inference' warnings until then are the warm-up's", limit)  # fmt: skip
        try:
            # Started and waited for from a worker thread with subprocess, not asyncio's subprocess API: under uvloop
            # (vLLM's server loop) that forks in the loop's thread of a many-threaded process and runs Python's at-fork
            # hooks in the child (uvloop issue #749); subprocess.Popen uses vfork / posix_spawn and runs none.
            self._child = await asyncio.to_thread(subprocess.Popen, command)
            code = await asyncio.to_thread(self._child.wait, limit)
            if code == 0:
                logger.info("warm-up: done after %.1f s; /ping answers 200", time.perf_counter() - t0)
            else:
                logger.warning("warm-up: failed (exit status %d) after %.1f s; serving without it", code,
                               time.perf_counter() - t0)  # fmt: skip
        except subprocess.TimeoutExpired:
            logger.warning("warm-up: not done after %g s (%s); serving without it", limit, TIMEOUT_ENV)
            self._kill()
            if self._child is not None:
                await asyncio.to_thread(self._child.wait)
        except OSError as err:
            logger.warning("warm-up: could not start (%s); serving without it", err)
        except Exception as err:  # whatever it was, /ping must not stay held: serve cold, and say why
            logger.warning("warm-up: stopped by %s: %s; serving without it", type(err).__name__, err)
            self._kill()
        finally:
            self.holding = False

    def _kill(self) -> None:
        if self._child is not None and self._child.poll() is None:
            self._child.kill()

    def stop(self) -> None:
        """At shutdown: a warm-up still running is killed (its requests would only meet a server going away)."""
        self._kill()
        if self._task is not None:
            self._task.cancel()
        logging.getLogger(ACCESS_LOGGER).removeFilter(self.quiet)
