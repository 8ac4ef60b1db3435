"""EngineProcesses on real processes: a child named like vLLM's engine, alive, killed (a zombie), reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from entrypoint.lmi.engine_processes import ENGINE_COMM, WORKER_COMM, EngineProcesses

NAMED_CHILD = f"open('/proc/self/comm', 'w').write({'VLLM::EngineCore'!r}); import time; time.sleep(120)"


def start_child(code: str, named: bool = True) -> subprocess.Popen[bytes]:
    """The child, once it has renamed itself like vLLM's engine (named) or at once."""
    child = subprocess.Popen([sys.executable, "-c", code])
    if not named:
        return child
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child.pid}/comm") as comm:
                if comm.read().strip() == ENGINE_COMM:
                    return child
        except OSError:
            pass
        time.sleep(0.05)
    return child


def test_a_killed_engine_child_is_dead_at_once_even_before_it_is_reaped() -> None:
    engine = start_child(NAMED_CHILD)
    try:
        watch = EngineProcesses()
        watch.take_roll()
        assert watch.seen == {engine.pid}
        assert not watch.dead()
        os.kill(engine.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not watch.dead() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert watch.dead(), "a SIGKILLed engine (a zombie, not reaped yet) must count as dead"
        engine.wait()  # reaped: gone from /proc
        assert watch.dead()
    finally:
        engine.kill()
        engine.wait()


# An engine holding memory takes a while to tear down after SIGKILL (vLLM's EngineCore: GBs; here 400 MB touched).
BIG_CHILD = (
    f"open('/proc/self/comm', 'w').write({'VLLM::EngineCore'!r}); import time; "
    "block = bytearray(400 * 1024 * 1024); block[::4096] = b'x' * len(block[::4096]); time.sleep(120)"
)


def test_the_engine_is_dead_the_moment_kill_returns_while_the_kernel_still_tears_it_down() -> None:
    # CI saw /ping 200 0.07 s after a SIGKILL with a zombie-or-gone check: the dying process was neither yet.
    # SIGKILL pending, then PF_EXITING, then zombie: one of them holds from kill()'s return on, without polling.
    engine = start_child(BIG_CHILD)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until the 400 MB are resident
            status = Path(f"/proc/{engine.pid}/status").read_text().splitlines()
            rss = next(line for line in status if line.startswith("VmRSS"))
            if int(rss.split()[1]) > 350 * 1024:
                break
            time.sleep(0.05)
        watch = EngineProcesses()
        watch.take_roll()
        assert watch.seen == {engine.pid} and not watch.dead()
        os.kill(engine.pid, signal.SIGKILL)
        assert watch.dead()
    finally:
        engine.kill()
        engine.wait()


def test_other_children_are_not_engines_and_without_engines_nothing_is_ever_dead() -> None:
    other = start_child("import time; time.sleep(120)", named=False)
    try:
        watch = EngineProcesses()
        watch.take_roll()
        assert watch.seen == set()
        other.kill()
        other.wait()
        assert not watch.dead()
    finally:
        other.kill()
        other.wait()


# An engine with two workers, as vLLM's CPU or GPU engine at tensor_parallel_degree=2: the workers are its children.
ENGINE_WITH_WORKERS = (
    "import subprocess, sys, time; open('/proc/self/comm', 'w').write('VLLM::EngineCore'); "
    "code = \"import sys, time; open('/proc/self/comm', 'w').write(sys.argv[1]); time.sleep(120)\"; "
    "workers = [subprocess.Popen([sys.executable, '-c', code, f'VLLM::Worker_TP{r}']) for r in (0, 1)]; "
    "print(' '.join(str(w.pid) for w in workers), flush=True); time.sleep(120)"
)


def test_a_killed_worker_of_the_engine_is_a_dead_engine_at_once() -> None:
    # vLLM's own check waits for its executor's shutdown first: /ping said 200 for ~4 s in the image test
    engine = subprocess.Popen([sys.executable, "-c", ENGINE_WITH_WORKERS], stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        assert engine.stdout is not None
        workers = [int(pid) for pid in engine.stdout.readline().split()]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until all three have renamed themselves
            comms = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in (engine.pid, *workers)]
            if comms[0] == ENGINE_COMM and all(c.startswith(WORKER_COMM) for c in comms[1:]):
                break
            time.sleep(0.05)
        watch = EngineProcesses()
        watch.take_roll()
        assert watch.seen == {engine.pid} and watch.workers == set(workers)
        assert not watch.dead()
        os.kill(workers[1], signal.SIGKILL)
        assert watch.dead(), "a SIGKILLed worker must count as a dead engine the moment kill() returns"
    finally:
        engine.kill()
        engine.wait()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
