"""EngineProcesses on real processes: a child named like vLLM's engine, alive, killed (a zombie), reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from entrypoint.lmi.engine_processes import ENGINE_COMM, EngineProcesses

NAMED_CHILD = f"open('/proc/self/comm', 'w').write({'VLLM::EngineCore'!r}); import time; time.sleep(120)"


def start_child(code: str) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child.pid}/comm") as comm:
                if comm.read().strip() == ENGINE_COMM or "sleep" not in code:
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


def test_other_children_are_not_engines_and_without_engines_nothing_is_ever_dead() -> None:
    other = start_child("import time; time.sleep(120)")
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
