"""benchmarks/device/h200_session.sh: the one-lease plan for the H200, checked here in its DRY_RUN mode.

The steps themselves (e2e.sh, tune_and_bench.sh, ...) have their own tests; this checks the scheduling that
decides what a short lease returns: both queues run, each step only when its minimum time is left, results
packed into ≤ 8 files, and the queues outlive the call that started them (their own session).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest_paths import REPO

SCRIPT = REPO / "benchmarks" / "device" / "h200_session.sh"
QUEUE_A = ["test-gpu"]
QUEUE_B = ["e2e-nemotron-diag"]
# one GPU: make test-gpu on the day's main first (issue 14's start goal was met on 2026-12-03d), then the Nemotron rows
ONE_GPU = ["test-gpu", "e2e-nemotron-diag"]


def _env(tmp_path: Path, gpus: int, deadline_s: int, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DRY_RUN": "1",
        "GPUS": str(gpus),
        "DEADLINE_S": str(deadline_s),
        "RUN_DIR": str(tmp_path / "run"),
        "OUT": str(tmp_path / "out"),
        **extra,
    }


def _session(tmp_path: Path, gpus: int, deadline_s: int, **extra: str) -> tuple[list[str], Path]:
    env = _env(tmp_path, gpus, deadline_s, **extra)
    start = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30)
    assert start.returncode == 0, start.stderr
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and "all done" in done.stdout, done.stdout + done.stderr
    status = (tmp_path / "out" / "status.txt").read_text().splitlines()
    return status, tmp_path / "out"


def _steps(status: list[str], queue: str, outcome: str) -> list[str]:
    return [line.split()[1] for line in status if line.startswith(queue + " ") and outcome in line]


def test_two_gpus_run_both_queues_in_order_and_pack_their_results(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=2, deadline_s=3000)
    assert _steps(status, "A", "rc=0") == QUEUE_A
    assert _steps(status, "B", "rc=0") == QUEUE_B
    assert sorted(p.name for p in out.iterdir()) == ["A.tar.gz", "B.tar.gz", "status.txt"]
    with tarfile.open(out / "B.tar.gz") as tar:
        console = tar.extractfile("B/e2e-nemotron-diag/console.log").read().decode()
    # each step writes where `step` points OUT, with the budget the harness must stop by
    assert f"OUT={tmp_path}/run/B/e2e-nemotron-diag" in console
    assert "BUDGET_S=640 bash benchmarks/device/e2e.sh nemotron-diag" in console
    assert "gpu processes: none (dry run)" in console  # what held the GPU when the step began


def test_one_gpu_runs_both_queues_steps_in_one_queue(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=1, deadline_s=3000)
    assert _steps(status, "A", "rc=0") == ONE_GPU and sorted(ONE_GPU) == sorted(QUEUE_A + QUEUE_B)
    assert not _steps(status, "B", "rc=") and (out / "A.tar.gz").is_file()


def test_a_step_starts_only_when_its_minimum_time_is_left(tmp_path: Path) -> None:
    # 400 s: too little for make test-gpu (450), enough for the Nemotron diagnosis (360)
    status, _ = _session(tmp_path, gpus=2, deadline_s=400)
    assert _steps(status, "A", "skipped") == ["test-gpu"]
    assert _steps(status, "A", "rc=0") == []
    assert _steps(status, "B", "rc=0") == QUEUE_B
    # 250 s: too little for any of them
    status, _ = _session(tmp_path / "short", gpus=2, deadline_s=250)
    assert _steps(status, "A", "skipped") == QUEUE_A and _steps(status, "B", "skipped") == QUEUE_B


def test_a_second_start_while_running_collects_instead_of_restarting(tmp_path: Path) -> None:
    env = _env(tmp_path, gpus=2, deadline_s=3000)
    run = [subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30)]
    run.append(subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30))
    assert [r.returncode for r in run] == [0, 0] and "in progress" in run[1].stderr
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert "all done" in done.stdout
    status = (tmp_path / "out" / "status.txt").read_text().splitlines()
    assert _steps(status, "A", "rc=0") == QUEUE_A and _steps(status, "B", "rc=0") == QUEUE_B  # each once


# --- PLAN=x8: issue 16 on 8 GPUs (or its TP4 phases on 4) ------------------------------------------------------

X8_ORDER = ["x8-qwen235-tp8", "x8-deepseek-tp8ep8", "x8-qwen235-tp8-start", "x8-deepseek-tp8", "x8-qwen235-tp4",
            "x8-maverick-tp8", "x8-qwen235-block-tp8ep8"]  # fmt: skip
X8_PAIRED = "x8-mixtral8x22-tp4"  # queue Y, beside x8-qwen235-tp4
MULTICAST_LINE = (
    "multicast: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm"
)


def _line(status: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(status) if line.startswith(prefix))


def _console(out: Path, queue: str, step: str) -> str:
    with tarfile.open(out / f"{queue}.tar.gz") as tar:
        return tar.extractfile(f"{queue}/{step}/console.log").read().decode()


def test_a_wait_on_a_machine_with_no_run_says_so_at_once(tmp_path: Path) -> None:
    """A machine given back between calls is replaced by a fresh one: its `wait` must not sleep out the call."""
    env = _env(tmp_path, 1, 600)
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode == 4 and "no run on this machine" in done.stderr, done.stderr


def test_x8_runs_every_phase_in_priority_order_with_the_tp4_pair_side_by_side(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=8, deadline_s=5000, PLAN="x8")
    assert _steps(status, "X", "rc=0") == X8_ORDER and _steps(status, "Y", "rc=0") == [X8_PAIRED]
    assert sorted(p.name for p in out.iterdir()) == ["X.tar.gz", "Y.tar.gz", "status.txt"]
    assert "env CUDA_VISIBLE_DEVICES=0,1,2,3 BUDGET_S=1470 bash benchmarks/device/e2e.sh x8-qwen235-tp4" in _console(
        out, "X", "x8-qwen235-tp4"
    )
    assert "env CUDA_VISIBLE_DEVICES=4,5,6,7 BUDGET_S=1070 bash benchmarks/device/e2e.sh x8-mixtral8x22-tp4" in (
        _console(out, "Y", X8_PAIRED)
    )
    # the pair starts together (same second), and the queue goes on only when both have ended
    starts = {q: (tmp_path / "run" / q / "queue.log").read_text() for q in ("X", "Y")}
    stamp = next(line[:10] for line in starts["X"].splitlines() if "x8-qwen235-tp4: start" in line)
    assert f"{stamp} Y {X8_PAIRED}: start" in starts["Y"]
    # (by the line's start: a loaded machine makes a 1 s dry-run step take 2)
    assert _line(status, f"Y {X8_PAIRED} rc=0 ") < _line(status, "X x8-maverick-tp8 rc=0 ")


def test_x8_every_step_runs_with_nvlink_multicast_off(tmp_path: Path) -> None:
    env_without = {
        k: v for k, v in os.environ.items() if k not in ("NCCL_NVLS_ENABLE", "VLLM_FLASHINFER_ALLREDUCE_BACKEND")
    }
    run = tmp_path / "run"
    env = {**env_without, "DRY_RUN": "1", "GPUS": "8", "PLAN": "x8", "RUN_DIR": str(run), "OUT": str(tmp_path / "o")}
    assert subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, timeout=30).returncode == 0
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert "all done" in done.stdout
    consoles = [p.read_text() for p in run.glob("[XY]/*/console.log")]
    assert len(consoles) == len(X8_ORDER) + 1
    assert all(c.startswith(MULTICAST_LINE) for c in consoles)


def test_x8_on_four_gpus_runs_the_tp4_phases_one_after_the_other(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=4, deadline_s=5000, PLAN="x8")
    assert _steps(status, "X", "rc=0") == ["x8-qwen235-tp4", X8_PAIRED] and not (out / "Y.tar.gz").exists()
    assert "CUDA_VISIBLE_DEVICES" not in _console(out, "X", X8_PAIRED)  # the queue's own GPUs 0-3


def test_x8_a_phase_starts_only_when_its_minimum_is_left(tmp_path: Path) -> None:
    status, _ = _session(tmp_path, gpus=8, deadline_s=650, PLAN="x8")  # the start breakdown needs 700 s
    assert _steps(status, "X", "skipped") == ["x8-qwen235-tp8-start"]
    assert "x8-qwen235-tp8" in _steps(status, "X", "rc=0") and X8_PAIRED in _steps(status, "Y", "rc=0")


def test_x8_steps_picks_what_a_later_lease_still_owes(tmp_path: Path) -> None:
    status, _ = _session(tmp_path, gpus=8, deadline_s=5000, PLAN="x8",
                         X8_STEPS="x8-maverick-tp8 x8-deepseek-tp8")  # fmt: skip
    assert _steps(status, "X", "rc=") == ["x8-deepseek-tp8", "x8-maverick-tp8"]  # the plan's order, not the list's


def test_x8_refuses_a_host_with_too_few_gpus(tmp_path: Path) -> None:
    env = _env(tmp_path, gpus=2, deadline_s=5000, PLAN="x8")
    start = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30)
    assert start.returncode == 3 and "PLAN=x8 needs 8 GPUs (or 4 for its TP4 phases)" in start.stderr


# --- e2e.sh's x8 phases: each is one harness command, planned here in its DRY_RUN mode --------------------------

E2E = REPO / "benchmarks" / "device" / "e2e.sh"
PHASE_SPLITS = {
    "x8-qwen235-tp8": ["qwen3-235b-a22b-fp8-static tp8 plan", "qwen3-235b-a22b-fp8-static tp8 auto",
                       "qwen3-235b-a22b-fp8-block plan", "qwen3-235b-a22b-fp8-block auto"],  # refused: plan_error
    "x8-qwen235-tp8-start": ["qwen3-235b-a22b-fp8-static tp8 plan"],
    "x8-deepseek-tp8ep8": ["deepseek-v3-fp8-block tp8ep8 triton", "deepseek-v3-fp8-block tp8ep8 plan"],
    "x8-deepseek-tp8": ["deepseek-v3-fp8-block tp8 plan", "deepseek-v3-fp8-block tp8 auto"],
    "x8-qwen235-tp4": ["qwen3-235b-a22b-fp8-static tp4 plan", "qwen3-235b-a22b-fp8-static tp4 auto",
                       "qwen3-235b-a22b-fp8-block tp4 plan"],
    "x8-mixtral8x22-tp4": ["mixtral-8x22b-fp8-static tp4 plan", "mixtral-8x22b-fp8-static tp4 auto"],
    "x8-maverick-tp8": ["llama-4-maverick-fp8 tp8 plan", "llama-4-maverick-fp8 tp8 triton_tuned"],
    "x8-qwen235-block-tp8ep8": ["qwen3-235b-a22b-fp8-block tp8ep8 triton", "qwen3-235b-a22b-fp8-block tp8ep8 plan"],
}  # fmt: skip


def _phase(tmp_path: Path, phase: str, gpus: int, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DRY_RUN": "1",
        "GPUS": str(gpus),
        "PLAN_VLLM_VERSION": "0.26.0",
        "OUT": str(tmp_path / "o"),
        "WORK_DIR": str(tmp_path / "w"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }
    return subprocess.run(["bash", str(E2E), phase], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize("phase", list(PHASE_SPLITS))
def test_each_x8_phase_plans_its_rows_with_multicast_off(tmp_path: Path, phase: str) -> None:
    done = _phase(tmp_path, phase, gpus=8)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [
        line.strip().split(" (")[0]
        for line in done.stdout.splitlines()
        if line.startswith("  ") and line.endswith("):")
    ]
    assert rows == PHASE_SPLITS[phase]
    started = len(rows) - done.stdout.count("    plan_error: ")
    assert done.stdout.count("    multicast guard: ok") == started and "REFUSED" not in done.stdout
    assert "5 workloads" in done.stdout or phase == "x8-qwen235-tp8-start"  # 1/8/64/128 + the 4096-token row


def test_the_block_control_at_tp8_is_reported_refused_not_started(tmp_path: Path) -> None:
    done = _phase(tmp_path, "x8-qwen235-tp8", gpus=8)
    assert done.stdout.count("plan_error: resolver refused: option.tensor_parallel_degree") == 2


def test_a_tp8_phase_refuses_fewer_than_eight_gpus(tmp_path: Path) -> None:
    done = _phase(tmp_path, "x8-deepseek-tp8", gpus=4)
    assert done.returncode == 3 and "phase x8-deepseek-tp8 needs 8 GPUs, this process sees 4" in done.stderr


def test_the_shell_and_the_harness_agree_on_the_multicast_settings() -> None:
    from benchmarks.e2e.parallel import MULTICAST_OFF

    text = (REPO / "benchmarks" / "device" / "multicast_off.sh").read_text()
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export ")
    )
    assert exports == MULTICAST_OFF


def test_the_issue_15_phases_plan_the_plugin_rows_and_the_logits_check(tmp_path: Path) -> None:
    done = _phase(tmp_path, "qwen-plugin", gpus=1)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    planned = [line.split() for line in done.stdout.splitlines() if line.startswith("  qwen3-30b-a3b-fp8-static tp1 ")]
    assert [words[2] for words in planned if "moe_backend=" in " ".join(words)] == [
        "plan", "plan_vllm_kernel", "triton", "auto"
    ]  # fmt: skip
    # the plan turns our kernel on for this shape on the H200 with vLLM 0.26 (the table has M = 1): only its row
    assert done.stdout.count("env+ MOE_SERVING_MOE_KERNEL=project") == 1
    logits = _phase(tmp_path, "plugin-logits", gpus=1)
    assert logits.returncode == 0 and "plugin-logits (dry run)" in logits.stdout


def test_the_attention_phase_runs_the_plan_once_per_backend_as_a_user_option(tmp_path: Path) -> None:
    env = {"ATTN_BACKENDS": "TRITON_ATTN FLASHINFER"}
    done = _phase(tmp_path, "qwen-attention", gpus=1, **env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    argvs = [line for line in done.stdout.splitlines() if line.strip().startswith("argv:")]
    assert len(argvs) == 2
    assert ["--attention-backend TRITON_ATTN" in argvs[0], "--attention-backend FLASHINFER" in argvs[1]] == [True] * 2
    assert done.stdout.count("env+ MOE_SERVING_MOE_KERNEL=project") == 2  # the plan, our kernel included
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["FLASHINFER", "TRITON_ATTN", "e2e_console.log"]
    # a name vLLM does not know is the resolver's refusal, reported as the row's plan_error (exit 2 from `serve`)
    bad = _phase(tmp_path, "qwen-attention", gpus=1, ATTN_BACKENDS="TRITON")
    assert "option.attention_backend='TRITON': not a vLLM attention_backend" in bad.stdout + bad.stderr
    empty = _phase(tmp_path, "qwen-attention", gpus=1, ATTN_BACKENDS=" ")
    assert empty.returncode == 2 and "ATTN_BACKENDS is empty" in empty.stderr


def test_the_nemotron_diagnosis_runs_the_plan_with_prefix_caching_off_then_on(tmp_path: Path) -> None:
    done = _phase(tmp_path, "nemotron-diag", gpus=1)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    argvs = [line for line in done.stdout.splitlines() if line.strip().startswith("argv:")]
    assert len(argvs) == 2
    assert "--no-enable-prefix-caching" in argvs[0] and " --enable-prefix-caching " in argvs[1]
    assert all(" --cudagraph-metrics " in argv for argv in argvs)  # which graph mode each step ran, logged
    assert done.stdout.count("8 workloads") == 0 and done.stdout.count("3 workloads × 5 reps") == 2
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["e2e_console.log", "no-prefix-caching",
                                                                   "prefix-caching"]  # fmt: skip


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
    """The lines one of the session's samplers wrote in 2.5 s, its definition cut from the script at first_line."""
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


def test_engine_check_runs_its_rows_with_realistic_routing_and_refuses_an_unknown_routing(tmp_path: Path) -> None:
    done = _phase(tmp_path, "engine-check", gpus=1)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "engine-check routing: uniform_random" in done.stdout
    rows = [line.strip().split(" (")[0] for line in done.stdout.splitlines() if line.endswith("):")]
    assert rows == ["qwen3-30b-a3b-fp8-static tp1 plan", "qwen3-30b-a3b-fp8-static tp1 triton"], rows
    bogus = _phase(tmp_path, "engine-check", gpus=1, ROUTING="hot")
    assert bogus.returncode == 2 and "ROUTING='hot'; accepted: uniform_random, dummy" in bogus.stderr
