"""Is the engine process this server started still alive? Read from /proc, for /ping without a race.

vLLM's /ping asks its engine client, whose `errored` flag is set by a monitor thread some milliseconds after the
EngineCore process dies; a health check landing in between answered 200 for a dead engine (seen in the image
test: 0.05 s after a SIGKILL). The kernel knows at once: from the moment kill() returns, the child has SIGKILL
pending (/proc/PID/status SigPnd/ShdPnd), then is exiting (PF_EXITING in /proc/PID/stat's flags: tearing down a
process with GBs mapped takes tens of ms, and a zombie-or-gone check alone answered 200 in that window, 0.07 s after
the kill, in CI), then a zombie, then gone. So the middleware remembers the server's EngineCore children the first
time it looks, and from then on one that is missing, a zombie, exiting or with SIGKILL pending means the engine is
dead. Where the engine is not a child of this process (a launcher that starts it
elsewhere), nothing is seen and vLLM's own check is the only one, as before.

With tensor parallel (more than one worker), the workers are the EngineCore's children ("VLLM::Worker_TP1"), and
vLLM's EngineCore reports a dead worker only after its executor's shutdown has waited for the others (about 4 s
seen in the image test, tests/image/test_two_workers.py): /ping answered 200 all that time. So the roll also holds
the workers of each engine, and a dying worker counts as a dead engine.
"""

from __future__ import annotations

import os
from pathlib import Path

# vLLM names its engine process "VLLM::EngineCore" (setproctitle); /proc/PID/comm keeps 15 characters.
ENGINE_COMM = "VLLM::EngineCor"
# ... and its worker processes "VLLM::Worker", "VLLM::Worker_TP1" (vllm/v1/executor/multiproc_executor.py).
WORKER_COMM = "VLLM::Worker"


PF_EXITING = 0x4  # include/linux/sched.h: set by do_exit() before the address space is torn down
SIGKILL_BIT = 1 << (9 - 1)  # bit of signal 9 in /proc/PID/status's pending masks


def _stat_fields(pid: int, proc: Path) -> tuple[str, str, int] | None:
    """(comm, state letter, flags) from /proc/PID/stat, or None when the process no longer exists."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "PID (comm) S ppid pgrp session tty tpgid flags ...": comm may hold spaces and parentheses, so the fields
    # are counted from the last ")".
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    rest = stat[stat.rindex(")") + 2 :].split(" ")
    return comm, rest[0], int(rest[6])


def _sigkill_pending(pid: int, proc: Path) -> bool:
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return True  # gone between the two reads
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & SIGKILL_BIT:
            return True
    return False


def is_dying(pid: int, proc: Path = Path("/proc"), comm_prefix: str = ENGINE_COMM) -> bool:
    """True when the EngineCore (or worker: `comm_prefix`) `pid` is gone, a zombie, exiting, renamed, or has SIGKILL
    pending."""
    fields = _stat_fields(pid, proc)
    if fields is None:
        return True
    comm, state, flags = fields
    if state in ("Z", "X") or flags & PF_EXITING or not comm.startswith(comm_prefix):
        return True
    return _sigkill_pending(pid, proc)


def engine_children(pid: int, proc: Path = Path("/proc"), comm_prefix: str = ENGINE_COMM) -> set[int]:
    """PIDs of the vLLM EngineCore processes (or workers: `comm_prefix`) among `pid`'s children (of any thread)."""
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
            fields = _stat_fields(child, proc)
            if fields is not None and fields[0].startswith(comm_prefix):
                children.add(child)
    return children


class EngineProcesses:
    def __init__(self, proc: Path = Path("/proc"), pid: int | None = None) -> None:
        self.proc = proc
        self.pid = os.getpid() if pid is None else pid
        self.seen: set[int] | None = None  # the engines
        self.workers: set[int] = set()  # their worker processes, where the engine runs more than one

    def take_roll(self) -> None:
        """Remember the engine processes and their workers running now (the middleware calls it at server start, when
        they exist)."""
        self.seen = engine_children(self.pid, self.proc)
        self.workers = {w for engine in self.seen for w in engine_children(engine, self.proc, WORKER_COMM)}

    def dead(self) -> bool:
        """True once an engine process or a worker on the roll is dying (is_dying). With none on it yet, takes the
        roll."""
        if not self.seen:
            self.take_roll()
            return False
        return any(is_dying(pid, self.proc) for pid in self.seen) or any(
            is_dying(pid, self.proc, WORKER_COMM) for pid in self.workers
        )
