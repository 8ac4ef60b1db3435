"""Is the engine process this server started still alive? Read from /proc, for /ping without a race.

vLLM's /ping asks its engine client, whose `errored` flag is set by a monitor thread some milliseconds after the
EngineCore process dies; a health check landing in between answered 200 for a dead engine (seen in the image
test: 0.05 s after a SIGKILL). The kernel knows at once: the killed child is a zombie, or gone. So the
middleware remembers the server's EngineCore children the first time it looks, and from then on a missing or
zombie one means the engine is dead. Where the engine is not a child of this process (a launcher that starts it
elsewhere), nothing is seen and vLLM's own check is the only one, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

# vLLM names its engine process "VLLM::EngineCore" (setproctitle); /proc/PID/comm keeps 15 characters.
ENGINE_COMM = "VLLM::EngineCor"


def process_state(pid: int, proc: Path = Path("/proc")) -> tuple[str, str] | None:
    """(comm, state letter) of a process, or None when it no longer exists."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "PID (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")".
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    return comm, stat[stat.rindex(")") + 2 :].split(" ", 1)[0]


def engine_children(pid: int, proc: Path = Path("/proc")) -> set[int]:
    """PIDs of the vLLM EngineCore processes among `pid`'s children (of any of its threads)."""
    children: set[int] = set()
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return children
    for task in tasks:
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, pids):
            state = process_state(child, proc)
            if state is not None and state[0].startswith(ENGINE_COMM):
                children.add(child)
    return children


class EngineProcesses:
    def __init__(self, proc: Path = Path("/proc"), pid: int | None = None) -> None:
        self.proc = proc
        self.pid = os.getpid() if pid is None else pid
        self.seen: set[int] | None = None

    def take_roll(self) -> None:
        """Remember the engine processes running now (the middleware calls it at server start, when they exist)."""
        self.seen = engine_children(self.pid, self.proc)

    def dead(self) -> bool:
        """True once an engine process on the roll is gone or a zombie. With none on it yet, takes the roll."""
        if not self.seen:
            self.take_roll()
            return False
        for pid in self.seen:
            state = process_state(pid, self.proc)
            if state is None or state[1] in ("Z", "X") or not state[0].startswith(ENGINE_COMM):
                return True
        return False
