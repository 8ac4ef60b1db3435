"""`--pin api=0-3,engine=4,client=5-6`: the served engine's processes and the load generator on chosen CPUs.

A harness setting, never what `serve` does: rows run with it carry it in their `pinning` column. Why: at one
request a Nemotron-3-Nano engine's repetitions spread 20-54 %, and the working hypothesis is that the engine's one
host thread sets the step, its speed depending on which core it shares with the API server or the client
(docs/results/nemotron.md). Pinning each to its own cores removes the placement; if the spread collapses, that
was it.

Roles: `api` the API server's process (the server's own pid), `engine` every process under it (vLLM's engine
core and its workers), `client` the harness worker that sends the requests. Applied to every thread of each
process once the server answers /ping (threads started later inherit their creator's CPUs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from benchmarks.e2e.host_meter import descendants

ROLES = ("api", "engine", "client")
ACCEPTED = "ROLE=CPUS[;ROLE=CPUS...] with ROLE in api, engine, client and CPUS like 0-3,8 (this host's CPUs)"


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8' → {0, 1, 2, 3, 8}; ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if "-" in part and not last.strip():
            raise ValueError(part)  # "0-" names no range
        lo, hi = int(first), int(last or first)
        if lo < 0 or hi < lo:
            raise ValueError(part)
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def parse_pin(text: str, available: frozenset[int] | None = None) -> dict[str, frozenset[int]]:
    """The --pin value as {role: CPUs}; raises ValueError naming the option, the value and what is accepted."""
    available = frozenset(os.sched_getaffinity(0)) if available is None else available
    pins: dict[str, frozenset[int]] = {}
    for item in filter(None, (p.strip() for p in text.split(";"))):
        role, sep, cpus = item.partition("=")
        try:
            if not sep or role not in ROLES or role in pins:
                raise ValueError(item)
            pins[role] = parse_cpu_list(cpus)
        except ValueError:
            raise ValueError(f"--pin: {text!r}; accepted: {ACCEPTED}") from None
        if not pins[role] <= available:
            raise ValueError(f"--pin: {role}={cpus} names CPUs this host lacks ({sorted(pins[role] - available)}); "
                             f"accepted: {ACCEPTED}; here: {sorted(available)}")  # fmt: skip
    if not pins:
        raise ValueError(f"--pin: {text!r}; accepted: {ACCEPTED}")
    return pins


def format_pin(pins: Mapping[str, frozenset[int]]) -> str:
    """The canonical spelling, for the rows' `pinning` column: roles in ROLES order, CPUs as ranges."""

    def ranges(cpus: frozenset[int]) -> str:
        out, run = [], []
        for cpu in sorted(cpus):
            if run and cpu != run[-1] + 1:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
                run = []
            run.append(cpu)
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        return ",".join(out)

    return ";".join(f"{role}={ranges(pins[role])}" for role in ROLES if role in pins)


def physical_cores(available: frozenset[int] | None = None) -> list[frozenset[int]]:
    """This host's physical cores as sets of their CPUs (SMT siblings together, from sysfs), those this process may
    use, in CPU order."""
    available = frozenset(os.sched_getaffinity(0)) if available is None else available
    cores = set()
    for cpu in sorted(available):
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(parse_cpu_list(siblings.read_text().strip()) & available)
        except (OSError, ValueError):
            cores.add(frozenset({cpu}))  # no topology: each CPU its own core
    return sorted(cores, key=min)


def default_pin(cores: list[frozenset[int]]) -> str:
    """Whole physical cores per role, so no two roles share a core through SMT: the API server one, the engine two,
    the load generator one; core 0 (interrupts, the kernel's housekeeping) left out when there are five or more."""
    usable = cores[1:] if len(cores) >= 5 else cores
    if len(usable) < 4:
        raise ValueError(f"default pinning: needs 4 physical cores, this host offers {len(cores)}; give PIN / --pin")
    union = frozenset().union
    return format_pin({"api": usable[0], "engine": union(*usable[1:3]), "client": usable[3]})


def _pin_process(pid: int, cpus: frozenset[int]) -> None:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return  # the process ended since it was listed
    for task in tasks:
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):
            continue  # the thread ended


def allowed_cpus(pid: int) -> str:
    """What the kernel says the process may run on (its main thread's Cpus_allowed_list); "gone" if it ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return "gone"
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return "?"


def apply(pins: Mapping[str, frozenset[int]], server_pid: int) -> dict[str, dict[int, str]]:
    """Pin every thread of each role's processes; returns {role: {pid: Cpus_allowed_list after}} for the record."""
    targets = {"api": [server_pid], "engine": descendants(server_pid), "client": [os.getpid()]}
    done: dict[str, dict[int, str]] = {}
    for role, cpus in pins.items():
        for pid in targets[role]:
            _pin_process(pid, cpus)
        done[role] = {pid: allowed_cpus(pid) for pid in targets[role]}
    return done


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.e2e.pinning", description="print this host's default --pin value (whole cores)"
    )
    parser.parse_args(argv)
    try:
        print(default_pin(physical_cores()))
    except ValueError as exc:
        print(f"pinning: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
