"""benchmarks/device/run_queue.sh: the queue runner, on queues this test writes (fake steps, no GPU).

What it must do on a GPU host: run each queue's steps in order in their own session, start a step only when its
minimum time is left and cut it at its maximum, run `&` steps side by side, and pack each queue's folders.
The shipped queues (benchmarks/device/queues/) are data: only their syntax is checked here.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest_paths import REPO

SCRIPT = REPO / "benchmarks" / "device" / "run_queue.sh"
MULTICAST_LINE = (
    "multicast: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"
)


def _env(tmp_path: Path, deadline_s: int, **extra: str) -> dict[str, str]:
    drop = ("NCCL_NVLS_ENABLE", "VLLM_FLASHINFER_ALLREDUCE_BACKEND", "CUDA_VISIBLE_DEVICES", "STEPS")
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "DEADLINE_S": str(deadline_s),
        "RUN_DIR": str(tmp_path / "run"),
        "OUT": str(tmp_path / "out"),
        "VLLM_SITE": str(tmp_path / "no-site"),
        **extra,
    }


def _queue(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.txt"
    path.write_text(text)
    return path


def _run(env: dict[str, str], *args: str, timeout: int = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


def _session(tmp_path: Path, queues: list[str], deadline_s: int = 600, **extra: str) -> tuple[list[str], Path]:
    env = _env(tmp_path, deadline_s, **extra)
    start = _run(env, "start", *queues)
    assert start.returncode == 0, start.stderr
    done = _run(env, "wait", "60", timeout=90)
    assert done.returncode == 0 and "all done" in done.stdout, done.stdout + done.stderr
    return (tmp_path / "out" / "status.txt").read_text().splitlines(), tmp_path / "out"


def _steps(status: list[str], queue: str, outcome: str) -> list[str]:
    return [line.split()[1] for line in status if line.startswith(queue + " ") and outcome in line]


def _console(out: Path, queue: str, step: str) -> str:
    with tarfile.open(out / f"{queue}.tar.gz") as tar:
        return tar.extractfile(f"{queue}/{step}/console.log").read().decode()


def test_two_queues_run_their_steps_in_order_on_their_gpus_and_pack_their_folders(tmp_path: Path) -> None:
    a = _queue(
        tmp_path, "a", "# a comment\none 1 30 echo one > $OUT/result.csv\n\ntwo 1 30 echo gpus=$CUDA_VISIBLE_DEVICES\n"
    )
    b = _queue(tmp_path, "b", "three 1 30 echo out=$OUT work=$WORK_DIR limit=$STEP_LIMIT_S\n")
    status, out = _session(tmp_path, [f"{a}@0", f"{b}@1"])
    assert _steps(status, "a", "rc=0") == ["one", "two"] and _steps(status, "b", "rc=0") == ["three"]
    assert sorted(p.name for p in out.iterdir()) == ["a.tar.gz", "b.tar.gz", "status.txt"]
    with tarfile.open(out / "a.tar.gz") as tar:
        assert tar.extractfile("a/one/result.csv").read() == b"one\n"  # the step writes where OUT points
        assert {"a/one/gpu_clocks.csv", "a/one/host_cpu.csv", "a/one/cpu_probe.csv"} <= set(tar.getnames())
    assert "gpus=0" in _console(out, "a", "two")
    three = _console(out, "b", "three")
    assert f"out={tmp_path}/run/b/three work={tmp_path}/run/work-b limit=" in three
    assert three.startswith(MULTICAST_LINE) and "gpu processes: " in three  # what held the GPU when the step began


def test_a_step_starts_only_when_its_minimum_time_is_left_and_is_cut_at_its_maximum(tmp_path: Path) -> None:
    q = _queue(tmp_path, "q", "long 500 600 echo never\nslow 1 1 sleep 20\nquick 1 30 true\n")
    status, _ = _session(tmp_path, [str(q)], deadline_s=100)
    assert _steps(status, "q", "skipped") == ["long"]
    assert _steps(status, "q", "rc=124") == ["slow"]  # timeout's code: cut at its 1 s
    assert _steps(status, "q", "rc=0") == ["quick"]


def test_steps_marked_with_an_ampersand_run_side_by_side_until_wait(tmp_path: Path) -> None:
    q = _queue(tmp_path, "q", "left 1 30 echo work=$WORK_DIR; sleep 2 &\nright 1 30 sleep 2 &\nwait\nafter 1 30 true\n")
    status, out = _session(tmp_path, [str(q)])
    log = (tmp_path / "run" / "q" / "queue.log").read_text().splitlines()

    def first(text: str) -> int:
        return next(i for i, line in enumerate(log) if text in line)

    # side by side: both steps (2 s of sleep each) started before either ended, in whichever order the two background
    # jobs wrote their lines. Not "in the same second" by the stamps: two starts milliseconds apart straddle a second's
    # edge now and then (a CI run, 2026-12-07)
    assert max(first(" left: start"), first(" right: start")) < min(first("q left rc="), first("q right rc="))
    # the queue goes on only when both have ended, and each side step gets its own scratch folder
    assert status.index(next(s for s in status if s.startswith("q after "))) == 2
    assert f"work={tmp_path}/run/work-q-left" in _console(out, "q", "left")


def test_steps_picks_named_steps_in_the_queues_order(tmp_path: Path) -> None:
    q = _queue(tmp_path, "q", "a 1 30 true\n# d 1 30 true\nb 1 30 true\nwait\nc 1 30 true\n")
    start = _run(_env(tmp_path, 600, STEPS="c a"), "start", str(q))
    assert start.returncode == 0 and "run_queue: STEPS: a c (the queue file's order)" in start.stdout, start.stdout
    status, _ = _session(tmp_path / "again", [str(q)], STEPS="c a")
    assert _steps(status, "q", "rc=") == ["a", "c"]


def test_a_step_name_no_queue_has_is_refused_before_anything_starts(tmp_path: Path) -> None:
    # a commented-out step is no step: 2026-12-06d's queue had answered steps behind a "# "
    q = _queue(tmp_path, "q", "a 1 30 true\n# d 1 30 true\nb 1 30 true\n")
    start = _run(_env(tmp_path, 600, STEPS="a d"), "start", str(q))
    assert start.returncode == 2 and not (tmp_path / "run").exists(), start.stdout + start.stderr
    assert "run_queue: STEPS names 'd', a step of no queue given; accepted: a b" in start.stderr, start.stderr


def test_a_second_start_while_running_collects_instead_of_restarting(tmp_path: Path) -> None:
    q = _queue(tmp_path, "q", "one 1 30 sleep 1\n")
    env = _env(tmp_path, 600)
    first, second = _run(env, "start", str(q)), _run(env, "start", str(q))
    assert [first.returncode, second.returncode] == [0, 0] and "in progress" in second.stderr
    assert "all done" in _run(env, "wait", "60", timeout=90).stdout
    assert _steps((tmp_path / "out" / "status.txt").read_text().splitlines(), "q", "rc=0") == ["one"]  # once


def test_a_wait_with_no_run_says_so_at_once(tmp_path: Path) -> None:
    done = _run(_env(tmp_path, 600), "wait", "60", timeout=10)
    assert done.returncode == 4 and "no run under" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("one 1 echo hi\n", "expected NAME MIN_S MAX_S COMMAND [&]"),  # MAX_S missing
        ("one 1 30\n", "expected NAME MIN_S MAX_S COMMAND [&]"),  # no command
        ("one 1 30 true\none 1 30 true\n", "step one appears twice"),
    ],
    ids=["a step without its maximum", "a step without a command", "a name given twice"],
)
def test_a_malformed_queue_is_refused_before_anything_starts(tmp_path: Path, text: str, message: str) -> None:
    q = _queue(tmp_path, "bad", text)
    start = _run(_env(tmp_path, 600), "start", str(q))
    assert start.returncode == 2 and message in start.stderr and not (tmp_path / "run").exists()


def test_an_unknown_queue_name_is_refused_with_the_shipped_names(tmp_path: Path) -> None:
    # 2026-12-07: `start h100` on an H100 host; the one-GPU queue is h200 whatever the card
    start = _run(_env(tmp_path, 600), "start", "h100")
    assert start.returncode == 2 and not (tmp_path / "run").exists(), start.stdout + start.stderr
    shipped = " ".join(sorted(q.stem for q in (SCRIPT.parent / "queues").glob("*.txt")))
    assert "h200" in shipped.split()
    assert f"h100.txt: no such queue file; the shipped queues: {shipped} (h200 runs on any one GPU)" in start.stderr


@pytest.mark.parametrize("queue", sorted(p.stem for p in (SCRIPT.parent / "queues").glob("*.txt")))
def test_every_shipped_queue_parses(queue: str) -> None:
    assert _run(_env(Path("/nonexistent"), 600), "check", queue).returncode == 0


FAKE_NVIDIA_SMI = """#!/bin/bash
# answers like a driver that knows clocks_throttle_reasons but not clocks_event_reasons
case "$*" in
  *clocks_event_reasons*) echo "Field \"clocks_event_reasons.active\" is not a valid field to query." >&2; exit 2 ;;
esac
echo "timestamp, index, clocks.sm [MHz]"
while [[ "$*" == *"-l 1"* ]]; do echo "2026/12/02 02:00:00.000, 0, 1980 MHz"; sleep 0.2; done
"""


def test_the_clock_sampler_takes_the_first_field_list_the_driver_answers(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    text = SCRIPT.read_text()
    functions = text[text.index("GPU_CLOCK_FIELDS=(") : text.index("step() {")]
    out = tmp_path / "gpu_clocks.csv"
    script = f"{functions}\nsample_gpu_clocks {out} & pid=$!; sleep 1.5; kill $pid; wait $pid; exit 0"
    done = subprocess.run(["bash", "-c", script], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("timestamp") and len(lines) >= 3 and "1980 MHz" in lines[1]


def _sampled(tmp_path: Path, first_line: str, function: str) -> list[str]:
    """The lines one of the runner's samplers wrote in 2.5 s, its definition cut from the script at first_line."""
    text = SCRIPT.read_text()
    functions = text[text.index(first_line) : text.index("step() {")]
    out = tmp_path / f"{function}.csv"
    script = f"{functions}\n{function} {out} & pid=$!; sleep 2.5; kill $pid; wait $pid; exit 0"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return out.read_text().splitlines()


def test_the_host_cpu_sampler_writes_one_numeric_line_a_second(tmp_path: Path) -> None:
    header, *lines = _sampled(tmp_path, "sample_host_cpu() {", "sample_host_cpu")
    columns = header.split(",")
    assert columns[:2] == ["epoch_s", "user"] and "steal" in columns and columns[-1] == "mean_mhz"
    assert len(lines) >= 2
    for line in lines:
        values = line.split(",")
        assert len(values) == len(columns), line
        assert all(v.replace(".", "", 1).isdigit() for v in values[:-1]), line  # mean_mhz may be empty (no cpuinfo MHz)
    first, last = (dict(zip(columns, line.split(","), strict=True)) for line in (lines[0], lines[-1]))
    assert float(last["epoch_s"]) > float(first["epoch_s"]) and int(last["idle"]) >= int(first["idle"])


def test_the_cpu_speed_probe_times_its_loop_once_a_second(tmp_path: Path) -> None:
    header, *lines = _sampled(tmp_path, "CPU_PROBE='", "sample_cpu_speed")
    assert header == "epoch_s,probe_ms" and len(lines) >= 2, lines
    stamps, millis = zip(*(map(float, line.split(",")) for line in lines), strict=True)
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(stamps))  # one a second, not a busy loop
    assert all(0.1 < ms < 1000 for ms in millis)  # a real loop's time, not zero and not a hang
