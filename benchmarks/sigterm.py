"""Turn SIGTERM into an ordinary exit, for harnesses run under `timeout` (benchmarks/device/run_queue.sh).

Python's default SIGTERM action kills the process at once: no `finally`, no `except BaseException`. The
harnesses start vLLM in its own session (so a stuck engine can be killed as a group), and only their own
cleanup stops it; without this the engine outlives the harness and keeps the GPU. Standard library only.
"""

from __future__ import annotations

import signal
import sys


def exit_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit(128 + SIGTERM), the status a shell reports for a killed process."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
