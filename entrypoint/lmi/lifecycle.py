"""Why the server stopped, and the exit status that says so.

vLLM's server stops by itself when its engine dies (its watchdog), but exits 0, the same as after
SIGTERM; a container that exits 0 is not seen as failed by `docker run --restart on-failure` and
the like. The middleware lives in the API server process, so it records here why the server
stopped (a stop signal, or an engine gone with nobody asking), and entrypoint.serve turns an engine
death into exit code 3 once vLLM's CLI has returned.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from entrypoint.lmi.engine_processes import EngineProcesses
from entrypoint.lmi.warmup_gate import WarmupGate

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

logger = logging.getLogger("entrypoint.lmi")

ENGINE_DIED_EXIT_CODE = 3


@dataclass
class ServerState:
    stop_requested: bool = False  # SIGTERM/SIGINT reached this process
    engine_died: bool = False  # the engine was gone at shutdown and nobody asked for it


SERVER_STATE = ServerState()


def engine_stopped(scope: Scope) -> bool:
    """vLLM's EngineClient.errored (0.26 and 0.32): true once the engine is shut down or dead."""
    app = scope.get("app")
    engine = getattr(getattr(app, "state", None), "engine_client", None)
    try:
        return bool(engine is not None and engine.errored)
    except Exception:  # an engine half torn down can raise from its properties: it is stopped
        return True


def _note_stop_signals() -> None:
    """Chain a recorder in front of the Python-level SIGTERM/SIGINT handlers.

    vLLM registers its handlers with loop.add_signal_handler, which is delivered through the
    loop's wakeup fd whatever Python-level handler is installed; so replacing the (no-op)
    Python-level one with a recorder that calls it keeps vLLM's shutdown path intact.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)

        def record(number: int, frame: Any, previous: Any = previous) -> None:
            SERVER_STATE.stop_requested = True
            if callable(previous):
                previous(number, frame)

        try:
            signal.signal(signum, record)
        except ValueError:  # not the main thread (an embedded server): leave signals alone
            return


def watch_lifespan(scope: Scope, receive: Receive, engines: EngineProcesses, warmup: WarmupGate) -> Receive:
    """The lifespan `receive`, noting stop signals and starting the warm-up at startup, an engine death at
    shutdown."""

    async def watched() -> Message:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _note_stop_signals()
            engines.take_roll()  # vLLM started its engine before the server: it is running now
            warmup.start()
        elif message["type"] == "lifespan.shutdown":
            warmup.stop()
            if not SERVER_STATE.stop_requested and engine_stopped(scope):
                SERVER_STATE.engine_died = True
                logger.error("the inference engine died; the server stops with exit code %d", ENGINE_DIED_EXIT_CODE)
        return message

    return watched


def exit_code() -> int:
    """What the server process should exit with once vLLM's CLI has returned."""
    return ENGINE_DIED_EXIT_CODE if SERVER_STATE.engine_died else 0
