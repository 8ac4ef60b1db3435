"""benchmarks.e2e.pinning: the --pin value checked, and real processes of this machine pinned through /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks.e2e import pinning
from benchmarks.e2e.host_meter import descendants

HERE = frozenset(range(4))


def test_the_value_is_read_and_spelled_canonically() -> None:
    pins = pinning.parse_pin("client=3; api=0-1,3 ;engine=2", HERE)
    assert pins == {"client": {3}, "api": {0, 1, 3}, "engine": {2}}
    assert pinning.format_pin(pins) == "api=0-1,3;engine=2;client=3"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu=0", "--pin: 'gpu=0'; accepted: ROLE=CPUS"),
        ("api=0;api=1", "--pin: 'api=0;api=1'; accepted"),
        ("api", "--pin: 'api'; accepted"),
        ("engine=3-1", "--pin: 'engine=3-1'; accepted"),
        ("engine=x", "--pin: 'engine=x'; accepted"),
        ("engine=0-", "--pin: 'engine=0-'; accepted"),
        (";", "--pin: ';'; accepted"),
        ("engine=2-5", "--pin: engine=2-5 names CPUs this host lacks ([4, 5]); accepted"),
    ],
)
def test_a_bad_value_is_refused_naming_it_and_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        pinning.parse_pin(text, HERE)
    assert message in str(info.value)


SERVER = "import subprocess, sys, time\nc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n" \
         "time.sleep(30)\n"  # fmt: skip


def test_the_api_server_and_the_engine_under_it_run_where_they_are_pinned() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    api, engine = frozenset(cpus[:1]), frozenset(cpus[-1:])
    server = subprocess.Popen([sys.executable, "-c", SERVER])
    try:
        deadline = time.monotonic() + 10
        while not descendants(server.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = descendants(server.pid)
        done = pinning.apply({"api": api, "engine": engine}, server.pid)
        assert done == {"api": {server.pid: str(cpus[0])}, "engine": {child: str(cpus[-1])}}
        for pid, cpu in ((server.pid, cpus[0]), (child, cpus[-1])):  # every thread, not only the main one
            assert {os.sched_getaffinity(int(t)) == {cpu} for t in os.listdir(f"/proc/{pid}/task")} == {True}
        assert os.sched_getaffinity(0) == set(cpus)  # the client was not named: this process was left alone
    finally:
        server.kill()
        server.wait()


def test_the_default_gives_each_role_whole_physical_cores() -> None:
    # 8 cores × 2 SMT threads, siblings n and n + 8 (a common numbering): core 0 left out, no role shares a core
    cores = [frozenset({n, n + 8}) for n in range(8)]
    assert pinning.default_pin(cores) == "api=1,9;engine=2-3,10-11;client=4,12"
    assert pinning.default_pin([frozenset({n}) for n in range(4)]) == "api=0;engine=1-2;client=3"
    with pytest.raises(ValueError, match="needs 4 physical cores, this host offers 3; give PIN / --pin"):
        pinning.default_pin([frozenset({n}) for n in range(3)])


def test_this_hosts_cores_cover_its_cpus_once() -> None:
    cores = pinning.physical_cores()
    cpus = [cpu for core in cores for cpu in core]
    assert sorted(cpus) == sorted(os.sched_getaffinity(0)) and len(cpus) == len(set(cpus))


def test_a_pinned_row_is_its_own_line_in_the_plots() -> None:
    from benchmarks.e2e.report import row_label

    assert row_label({"backend": "plan", "options": "", "pinning": "api=0;engine=1"}) == "plan [pinned api=0;engine=1]"
    assert row_label({"backend": "plan", "options": ""}) == "plan"
