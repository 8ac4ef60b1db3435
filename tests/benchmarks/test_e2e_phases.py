"""benchmarks/device/e2e.sh: each phase is one harness command, planned here in its DRY_RUN mode (no GPU).

The queue runner that schedules phases on a GPU host has its own test (test_run_queue.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.e2e.routing import ROUTINGS
from tests.benchmarks.e2e_dry_run import dry_run_env
from tests.conftest_paths import REPO

E2E = REPO / "benchmarks" / "device" / "e2e.sh"
PHASE_SPLITS = {
    # vLLM 0.32 refines the block control's scale blocks at TP8, so its plan is vLLM's own choice (auto = plan)
    "x8-qwen235-tp8": ["qwen3-235b-a22b-fp8-static tp8 plan", "qwen3-235b-a22b-fp8-static tp8 auto",
                       "qwen3-235b-a22b-fp8-block tp8 plan"],
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
    env = dry_run_env(tmp_path, gpus, **extra)
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


def test_the_block_control_at_tp8_is_planned_on_0_32_and_reported_refused_on_0_26(tmp_path: Path) -> None:
    done = _phase(tmp_path, "x8-qwen235-tp8", gpus=8)
    assert done.returncode == 0 and "plan_error" not in done.stdout
    assert "qwen3-235b-a22b-fp8-block tp8          auto                moe_backend=auto                = plan" in (
        done.stdout
    )
    # vLLM 0.26 had no refinement: 1536 / 8 = 192 columns per GPU are not whole 128x128 blocks, so no engine starts
    old = _phase(tmp_path / "0.26", "x8-qwen235-tp8", gpus=8, PLAN_VLLM_VERSION="0.26.0")
    assert old.stdout.count("plan_error: resolver refused: option.tensor_parallel_degree") == 2


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
    # the plan turns our kernel on for this shape on the H200 with vLLM 0.32 (the table has M = 1): only its row
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
    # named as the harness set it (OPTION_ATTENTION_BACKEND), with the option it stands for
    assert "(option.attention_backend)='TRITON': not a vLLM attention_backend" in bad.stdout + bad.stderr
    empty = _phase(tmp_path, "qwen-attention", gpus=1, ATTN_BACKENDS=" ")
    assert empty.returncode == 2 and "ATTN_BACKENDS is empty" in empty.stderr


def test_the_nemotron_diagnosis_runs_the_plan_with_prefix_caching_off_then_on(tmp_path: Path) -> None:
    done = _phase(tmp_path, "nemotron-diag", gpus=1, BUDGET_S="640")  # two runs of ~288 s (the default 540 is refused)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    argvs = [line for line in done.stdout.splitlines() if line.strip().startswith("argv:")]
    assert len(argvs) == 2
    assert "--no-enable-prefix-caching" in argvs[0] and " --enable-prefix-caching " in argvs[1]
    assert all(" --cudagraph-metrics " in argv for argv in argvs)  # which graph mode each step ran, logged
    assert done.stdout.count("8 workloads") == 0 and done.stdout.count("3 workloads × 5 reps") == 2
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["e2e_console.log", "no-prefix-caching",
                                                                   "prefix-caching"]  # fmt: skip


ROUTING_LINE = "env+ VLLM_MOE_ROUTING_SIMULATION_STRATEGY="


def test_every_phase_routes_with_the_simulator_unless_told_dummy_and_refuses_an_unknown_routing(tmp_path: Path) -> None:
    # the caller's own setting never leaks into a row: ROUTING (--routing) decides, dummy unsets it
    done = _phase(tmp_path, "engine-check", gpus=1, VLLM_MOE_ROUTING_SIMULATION_STRATEGY="normal_routing")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "e2e: routing: uniform_one_launch" in done.stdout
    rows = [line.strip().split(" (")[0] for line in done.stdout.splitlines() if line.endswith("):")]
    assert rows == ["qwen3-30b-a3b-fp8-static tp1 plan", "qwen3-30b-a3b-fp8-static tp1 triton"], rows
    assert [line.strip() for line in done.stdout.splitlines() if ROUTING_LINE in line] == [
        ROUTING_LINE + "uniform_one_launch"
    ] * 2
    skewed = _phase(tmp_path, "mixtral", gpus=1, ROUTING="hot_experts")
    assert skewed.returncode == 0 and skewed.stdout.count(ROUTING_LINE + "hot_experts") == 3, skewed.stdout[-3000:]
    control = _phase(tmp_path, "engine-check", gpus=1, ROUTING="dummy",
                     VLLM_MOE_ROUTING_SIMULATION_STRATEGY="uniform_random")  # fmt: skip
    assert control.returncode == 0 and "e2e: routing: dummy" in control.stdout
    assert ROUTING_LINE not in control.stdout
    routing = _phase(tmp_path, "routing", gpus=1, ROUTING="hot_experts", CONC="1,128")
    assert routing.returncode == 0, routing.stdout[-3000:]
    assert "e2e plan: 3 workloads" in routing.stdout and routing.stdout.count(ROUTING_LINE + "hot_experts") == 2
    three = "dummy uniform_random hot_experts"
    cost = _phase(tmp_path / "cost", "routing-cost", gpus=1, MODEL="mixtral-8x7b-fp8-static", ROUTINGS=three,
                  BUDGET_S="900")  # fmt: skip
    assert cost.returncode == 0, cost.stdout[-3000:] + cost.stderr[-3000:]
    # one run per routing, each in its own folder, the plan of the model asked for at one request only
    assert [line for line in cost.stdout.splitlines() if line.startswith("e2e: routing: ")] == [
        f"e2e: routing: {name} ({ROUTINGS[name]})" for name in three.split()
    ]
    assert cost.stdout.count("mixtral-8x7b-fp8-static tp1 plan (no --option):") == 3  # routing is not an LMI option
    # 900 s, less the warm preparation, split three ways: 293-294 s each, above the harness's ~265 s for one engine
    assert re.findall(r"e2e plan: 2 workloads × 5 reps; budget (\d+) s", cost.stdout) == ["293", "293", "294"]
    assert cost.stdout.count("e2e: first engine: needs ~265 s with the preparation; budget 29") == 3
    assert sorted(p.name for p in (tmp_path / "cost" / "o").iterdir()) == ["dummy", "e2e_console.log", "hot_experts",
                                                                   "uniform_random"]  # fmt: skip
    # the default: our routing against the model's own router (what the routing costs), in the default 540 s
    default = _phase(tmp_path / "default-cost", "routing-cost", gpus=1)
    assert [line.split(" (")[0] for line in default.stdout.splitlines() if line.startswith("e2e: routing: ")] == [
        "e2e: routing: uniform_one_launch", "e2e: routing: dummy"]  # fmt: skip
    # a comparison whose budget cannot start each side's engine is refused before anything runs (2026-12-06d: by
    # hand, 555 s for two Nemotron runs of ~288 s each; the first skipped, the second measured without a reference)
    short = _phase(tmp_path / "short", "routing-cost", gpus=1, MODEL="nemotron-3-nano-30b-a3b-fp8", BUDGET_S="555")
    assert short.returncode == 2 and "e2e: routing: " not in short.stdout, short.stdout[-3000:]
    refusal = ("e2e.sh: phase routing-cost compares 2 runs (uniform_one_launch dummy); each needs ~288 s for its "
               "first engine, 2 x 288 s in all, and BUDGET_S=555 leaves ~535 s: raise BUDGET_S")  # fmt: skip
    assert refusal in short.stderr, short.stderr[-3000:]
    assert not (tmp_path / "short" / "o" / "uniform_one_launch").exists()
    bogus = _phase(tmp_path, "engine-check", gpus=1, ROUTING="hot")
    assert bogus.returncode == 2
    refusal = "--routing: 'hot' is not a routing; accepted: uniform_random, uniform_one_launch, hot_experts, dummy"
    assert refusal in bogus.stdout + bogus.stderr


def test_the_pinning_phase_runs_the_plan_unpinned_then_pinned_each_in_its_folder(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    pin = f"api={cpu};engine={cpu};client={cpu}"
    done = _phase(tmp_path, "nemotron-pin", gpus=1, PIN=pin, BUDGET_S="640")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("e2e: pinning: ")] == [
        f"e2e: pinning: {pin} (benchmarks/e2e/pinning.py; a comparison row: serve never pins)"
    ]
    assert done.stdout.count("nemotron-3-nano-30b-a3b-fp8 tp1 plan (no --option):") == 2  # --pin is no LMI option
    assert {"unpinned", "pinned", "lscpu.txt"} <= {p.name for p in (tmp_path / "o").iterdir()}
    bad = _phase(tmp_path / "bad", "nemotron-pin", gpus=1, PIN="engine=99999", BUDGET_S="640")
    assert "--pin: engine=99999 names CPUs this host lacks" in bad.stdout + bad.stderr
    # without PIN: whole physical cores per role from this host's topology, or a clear refusal on a small host
    from benchmarks.e2e.pinning import default_pin, physical_cores

    default = _phase(tmp_path / "default", "nemotron-pin", gpus=1, BUDGET_S="640")
    try:
        expected = default_pin(physical_cores())
    except ValueError as exc:
        assert default.returncode == 2 and str(exc) in default.stderr, default.stderr[-2000:]
    else:
        assert default.returncode == 0 and f"e2e: pinning: {expected} " in default.stdout


@pytest.mark.parametrize(
    ("phase", "extra", "rows"),
    [
        ("profile", {}, ["plan", "plan_vllm_kernel"]),
        ("profile", {"PROFILE_BACKENDS": "plan"}, ["plan"]),
        ("routing", {}, ["plan", "triton"]),
        ("routing", {"ROUTING_BACKENDS": "plan,triton,auto"}, ["plan", "triton", "auto"]),
        (  # issue 33's rows (queue h200.txt, fold-qwen): each comparison row its own engine
            "routing",
            {"ROUTING_BACKENDS": "plan,plan_fold_pdl,triton,plan_fold,auto"},
            ["plan", "plan_fold_pdl", "triton", "plan_fold", "auto"],
        ),
        ("tuned", {"MODEL": "phi-3.5-moe-fp8-static"}, ["plan", "triton"]),
        (
            "tuned",
            {"MODEL": "phi-3.5-moe-fp8-static", "TUNED_BACKENDS": "plan,auto,triton"},
            ["plan", "auto", "triton"],
        ),
    ],
)
def test_the_single_gpu_phases_plan_the_rows_their_backends_variable_names(
    tmp_path: Path, phase: str, extra: dict[str, str], rows: list[str]
) -> None:
    # the short variants: one profiled engine, auto added to the routing rows and to the tuned model's
    done = _phase(tmp_path, phase, gpus=1, **extra)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the plan's table: "  MODEL tpN  BACKEND  moe_backend=...", before the dry run's per-server listing (which lists
    # a row that is the same engine as an earlier one only once: without a tuned layer, the tuned plan is triton)
    planned = [
        line.split()[2] for line in done.stdout.splitlines() if re.match(r"  \S+ tp\d+ +\S+ +moe_backend=", line)
    ]
    assert planned == rows


def test_a_tune_that_fails_stops_the_tuned_phase_before_any_engine(tmp_path: Path) -> None:
    """2026-12-06e: the tune raised and the step went on, measuring the plan without its layer against triton. Here
    (no GPU) the real tune refuses with exit 2; the phase must stop there, naming the tune's log."""
    env = dry_run_env(tmp_path, 1, MODEL="phi-3.5-moe-fp8-static", VLLM_SITE=str(tmp_path / "no-site"))
    del env["DRY_RUN"]
    done = subprocess.run(["bash", str(E2E), "tuned"], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "e2e.sh: the tune exited 2 (tune_phi-3.5-moe-fp8-static.log); no engine started" in done.stderr
    assert not (tmp_path / "o" / "h200_e2e.csv").exists()


def test_a_tuned_layer_without_a_tile_file_stops_the_tuned_phase(tmp_path: Path) -> None:
    """A tune that skipped, or TUNED_LAYER_FROM without tiles: the plan would be LMI-equivalent, one engine twice."""
    (tmp_path / "from").mkdir()
    (tmp_path / "from" / "provenance.json").write_text("{}")
    env = dry_run_env(tmp_path, 1, MODEL="phi-3.5-moe-fp8-static", VLLM_SITE=str(tmp_path / "no-site"),
                      TUNED_LAYER_FROM=str(tmp_path / "from"))  # fmt: skip
    del env["DRY_RUN"]
    done = subprocess.run(["bash", str(E2E), "tuned"], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "e2e.sh: no tile file under" in done.stderr and "no engine started" in done.stderr
