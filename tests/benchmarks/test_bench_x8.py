"""The 8 x H200 rows (issue 16), checked without a GPU: plans, options, dry run, the multicast guard, the new facts.

Every served row's server must be exactly what `python -m entrypoint serve` would exec for the same options on
8 simulated H200s (the plan row), or that with another `--moe-backend` (the comparison rows); the tuned-file lookup
must follow the split the plan asks for; a multi-GPU row must not start without NVLink multicast switched off.
"""

from __future__ import annotations

import csv
import os
import shlex
from pathlib import Path

import pytest

from benchmarks.e2e import cli, jitcount, jobs, logparse, parallel, report, run_args, runner, served, spec
from benchmarks.e2e import options as bench_opts
from benchmarks.e2e.backends import KERNEL_ENV, TUNED_ENV, EngineSetup
from benchmarks.e2e.logparse import EngineLog
from entrypoint.inputs.gather import build_plan
from entrypoint.serve import vllm_command

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e" / "models"
PLAN_ARGS = ["--plan-gpu", "H200", "--plan-num-gpus", "8", "--plan-vllm-version", "0.26.0"]
EP = {"enable_expert_parallel": "true"}
TP4 = {"tensor_parallel_degree": "4"}


@pytest.fixture(autouse=True)
def multicast_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """As benchmarks/device/multicast_off.sh exports them on the 8-GPU host (each test may unset one)."""
    for key, value in parallel.MULTICAST_OFF.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv(TUNED_ENV, raising=False)


def plan_rows(tmp_path: Path, model: str, options: dict[str, str], backends: str = "plan,auto,triton"):
    argv = ["--models", model, "--backends", backends, "--conc", "1,8,64,128", "--long-conc", "1",
            "--work-dir", str(tmp_path), *PLAN_ARGS]  # fmt: skip
    argv += [a for key, value in options.items() for a in ("--option", f"{key}={value}")]
    return jobs.plan_jobs(run_args.parse_run_args(argv), None)


# --- the plans: what serve would exec, per model and split -----------------------------------------------------

SPLITS = [
    # (model, options, split, --moe-backend of the plan, the shipped tile file the plan's Triton reads)
    pytest.param("qwen3-235b-a22b-fp8-static", {}, "tp8", "triton", "E=128,N=192,device_name=NVIDIA_H200,"
                 "dtype=fp8_w8a8.json", id="Qwen3-235B static: tensor_parallel_degree=max is TP8, Triton + TP8 tiles"),
    pytest.param("qwen3-235b-a22b-fp8-static", TP4, "tp4", "triton", "E=128,N=384,device_name=NVIDIA_H200,"
                 "dtype=fp8_w8a8.json", id="Qwen3-235B static at TP4 reads the TP4 tiles"),
    pytest.param("qwen3-235b-a22b-fp8-block", TP4, "tp4", None, "", id="Qwen3-235B block at TP4 is left to vLLM"),
    pytest.param("qwen3-235b-a22b-fp8-block", EP, "tp8ep8", None, "", id="Qwen3-235B block at TP8 EP8 fits"),
    pytest.param("deepseek-v3-fp8-block", {}, "tp8", None, "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                 "block_shape=[128,128].json", id="DeepSeek-V3 TP8: vLLM's Triton with our TP8 block tiles"),
    pytest.param("deepseek-v3-fp8-block", EP, "tp8ep8", None, "", id="DeepSeek-V3 TP8 EP8: vLLM's FlashInfer CUTLASS"),
    pytest.param("mixtral-8x22b-fp8-static", TP4, "tp4", "triton", "E=8,N=4096,device_name=NVIDIA_H200,"
                 "dtype=fp8_w8a8.json", id="Mixtral-8x22B static at TP4: Triton + TP4 tiles"),
    pytest.param("llama-4-maverick-fp8", {}, "tp8", None, "", id="Maverick FP8 channel x token: vLLM's CUTLASS"),
    # the other splits of each model (not phases of the 8-GPU plan, but what a user may set)
    pytest.param("qwen3-235b-a22b-fp8-static", EP, "tp8ep8", "triton", "", id="Qwen3-235B static EP8: no E=16 file"),
    pytest.param("deepseek-v3-fp8-block", TP4, "tp4", None, "", id="DeepSeek-V3 TP4: no E=256,N=512 block file"),
    pytest.param("mixtral-8x22b-fp8-static", {}, "tp8", "triton", "E=8,N=2048,device_name=NVIDIA_H200,"
                 "dtype=fp8_w8a8.json", id="Mixtral-8x22B static TP8: the TP8 tiles"),
    pytest.param("mixtral-8x22b-fp8-static", EP, "tp8ep8", "triton", "", id="Mixtral-8x22B EP8: one expert a GPU"),
    pytest.param("llama-4-maverick-fp8", TP4, "tp4", None, "", id="Maverick TP4"),
    pytest.param("llama-4-maverick-fp8", EP, "tp8ep8", None, "", id="Maverick EP8"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "options", "split", "moe_backend", "tuned_file"), SPLITS)
def test_the_plan_row_is_exactly_what_serve_execs_for_those_options(
    tmp_path: Path, model: str, options: dict[str, str], split: str, moe_backend: str | None, tuned_file: str
) -> None:
    plan_job = plan_rows(tmp_path, model, options)[0]
    environ = {**os.environ, "MOE_SERVING_DEFAULT_PROPERTIES": str(served.IMAGE_DEFAULT_PROPERTIES),
               **jobs.served_options(run_args.parse_run_args(["--conc", "1,8,64,128", "--long-conc", "1"])),
               **bench_opts.as_environment(options)}  # fmt: skip
    plan = build_plan(model=str(MODELS / model), environ=environ, host="127.0.0.1", port=jobs.PLAN_PORT, gpu="H200",
                      num_gpus=8, vllm_version="0.26.0")  # fmt: skip
    assert plan_job.setup.backend == "plan" and plan_job.command is not None
    assert plan_job.command.argv == tuple(vllm_command(plan))
    assert {k: plan_job.command.env[k] for k in plan.env} == plan.env
    assert plan_job.split == split and parallel.split_of(plan_job.command.argv).label == split
    assert served.moe_backend_of(plan_job.command.argv) == (moe_backend or "auto")
    assert plan_job.tuned_file == tuned_file
    assert plan_job.options == bench_opts.label(options)


@pytest.mark.parametrize(("model", "options", "split", "moe_backend", "tuned_file"), SPLITS)
def test_comparison_rows_differ_from_the_plan_in_the_moe_backend_and_kernel_switches_only(
    tmp_path: Path, model: str, options: dict[str, str], split: str, moe_backend: str | None, tuned_file: str
) -> None:
    plan_job, *others = plan_rows(tmp_path, model, options)
    assert plan_job.command is not None
    for row in others:
        if row.setup.same_engine_as:
            continue  # the same engine as an earlier row: it does not start
        assert row.command is not None and row.split == split
        assert served.with_moe_backend(row.command.argv, None) == served.with_moe_backend(plan_job.command.argv, None)
        skip = {*jobs.HARNESS_ENV, TUNED_ENV, KERNEL_ENV}
        mine = {k: v for k, v in row.command.env.items() if k not in skip}
        plans = {k: v for k, v in plan_job.command.env.items() if k not in skip}
        assert mine == plans
        assert TUNED_ENV not in row.command.env  # auto and triton: vLLM's own tile files
        assert KERNEL_ENV not in row.command.env  # and vLLM's own kernels (LMI runs no plugin)


def test_the_tuned_file_lookup_follows_the_plans_split_not_one_gpu(tmp_path: Path) -> None:
    by_split = {j.split: j.shape.partition for j in (plan_rows(tmp_path, "deepseek-v3-fp8-block", o, "plan")[0]
                                                     for o in ({}, TP4, EP))}  # fmt: skip
    assert by_split == {"tp8": (256, 256), "tp4": (256, 512), "tp8ep8": (32, 2048)}


def test_the_block_control_at_tp8_is_a_plan_error_row_that_starts_nothing(tmp_path: Path) -> None:
    rows = plan_rows(tmp_path, "qwen3-235b-a22b-fp8-block", {})
    assert [r.setup.backend for r in rows] == ["plan", "auto", "triton"]
    for row in rows:
        assert row.command is None and row.estimate_s == 0.0
        assert "192 columns per GPU, not whole 128x128 FP8 blocks" in row.setup.error


# --- --option: parsed, refused, recorded -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("tensor_parallel_degree=4", ("tensor_parallel_degree", "4")),
        ("option.enable_expert_parallel=true", ("enable_expert_parallel", "true")),
        ("max_num_batched_tokens= 8192 ", ("max_num_batched_tokens", "8192")),
    ],
    ids=["a plain key", "the serving.properties spelling", "spaces around the value"],
)
def test_an_option_is_an_lmi_key_and_its_value(text: str, parsed: tuple[str, str]) -> None:
    assert bench_opts.parse_option(text) == parsed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--option", "tensor_parallel_degree"], "expected KEY=VALUE"),
        (["--option", "Tensor-Parallel=4"], "the key 'Tensor-Parallel' is not an LMI option name"),
        (["--option", "=4"], "the key '' is not an LMI option name"),
        (["--option", "tensor_parallel_degree="], "the value is empty"),
        (["--option", "moe_backend=triton"], "the rows differ in the MoE backend only"),
        (["--option", "max_model_len=8192"], "the harness sizes it from the workloads"),
        (["--option", "tensor_parallel_degree=4", "--option", "tensor_parallel_degree=8"], "given twice"),
        (["--engine", "offline", "--option", "tensor_parallel_degree=4"], "--option needs --engine served"),
        (["--engine-arg", "tensor_parallel_size=4"], "give LMI options with --option KEY=VALUE"),
        (["--plan-num-gpus", "8"], "--plan-num-gpus 8: needs --plan-gpu"),
        (["--plan-gpu", "H200", "--plan-num-gpus", "0"], "a count of at least 1"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_a_bad_option_is_refused_with_a_message_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        run_args.parse_run_args(argv)
    assert refused.value.code == 2
    assert message in capsys.readouterr().err


def test_options_reach_every_row_as_option_variables(tmp_path: Path) -> None:
    rows = plan_rows(tmp_path, "qwen3-235b-a22b-fp8-static", {**TP4, "max_num_batched_tokens": "8192"})
    for row in rows:
        assert row.command is not None and row.options == "max_num_batched_tokens=8192;tensor_parallel_degree=4"
        assert row.command.env["OPTION_TENSOR_PARALLEL_DEGREE"] == "4"
        assert row.command.argv[row.command.argv.index("--max-num-batched-tokens") + 1] == "8192"


# --- the dry run and the multicast guard -------------------------------------------------------------------------


def test_the_dry_run_prints_each_rows_exact_argv_and_the_environment_it_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--dry-run", "--models", "deepseek-v3-fp8-block", "--backends", "plan,auto", "--option",
            "enable_expert_parallel=true", "--conc", "1,8,64,128", "--long-conc", "1", "--work-dir", str(tmp_path),
            *PLAN_ARGS]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    (plan_job, auto_job) = plan_rows(tmp_path, "deepseek-v3-fp8-block", EP, "plan,auto")
    assert plan_job.command is not None and auto_job.setup.same_engine_as == "plan"
    assert f"    argv: {shlex.join(plan_job.command.argv)}\n" in out
    assert "  deepseek-v3-fp8-block tp8ep8 plan (enable_expert_parallel=true):" in out
    assert "    env+ OPTION_ENABLE_EXPERT_PARALLEL=true\n" in out
    assert "    multicast guard: ok\n" in out
    assert "    comm env: NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 " in out
    assert "deepseek-v3-fp8-block tp8ep8 auto" not in out  # the same engine as plan: nothing to start


def test_a_multi_gpu_row_without_multicast_off_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VLLM_FLASHINFER_ALLREDUCE_BACKEND")  # vLLM's auto picks FlashInfer's mnnvl: cuMulticastCreate

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run went past the guard")

    monkeypatch.setattr(runner, "prewarm_flashinfer", started)
    argv = ["run", "--models", "qwen3-235b-a22b-fp8-static", "--backends", "plan", "--out-dir", str(tmp_path / "o"),
            "--work-dir", str(tmp_path), *PLAN_ARGS]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "qwen3-235b-a22b-fp8-static tp8 plan: needs VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm (unset)" in err
    assert not (tmp_path / "o").exists()


def test_one_gpu_rows_need_no_guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in parallel.MULTICAST_OFF:
        monkeypatch.delenv(key)
    argv = ["--models", "qwen3-30b-a3b-fp8-static", "--backends", "plan", "--work-dir", str(tmp_path),
            "--plan-gpu", "H200", "--plan-vllm-version", "0.26.0"]  # fmt: skip
    (job,) = jobs.plan_jobs(run_args.parse_run_args(argv), None)
    assert job.split == "tp1" and jobs.multicast_refusals([job]) == []


def test_plan_error_rows_are_written_with_their_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "prewarm_flashinfer", lambda *a, **k: None)
    out = tmp_path / "out"
    argv = ["run", "--models", "qwen3-235b-a22b-fp8-block", "--backends", "plan,auto", "--conc", "1",
            "--long-input-len", "0", "--out-dir", str(out), "--work-dir", str(tmp_path / "w"), *PLAN_ARGS]  # fmt: skip
    assert cli.main(argv) == 0
    rows = list(csv.DictReader((out / "h200_e2e.csv").open()))
    assert [(r["backend"], r["status"]) for r in rows] == [("plan", "plan_error"), ("auto", "plan_error")]
    assert all("enable_expert_parallel=true" in r["error"] for r in rows)


# --- the facts each row records ----------------------------------------------------------------------------------


def _result(log: str, events: list[dict[str, object]]) -> runner.JobResult:
    return runner.JobResult(status="ok", log=logparse.parse_engine_log(log), events=events)


TRITON_LOG = "INFO Using TRITON Fp8 MoE backend out of potential backends: ['TRITON'].\n"
DEFAULT_TILES = "WARNING Using default MoE config. Performance might be sub-optimal! Config file not found at x\n"


@pytest.mark.parametrize(
    ("log", "shipped", "check"),
    [
        (TRITON_LOG, "E=128,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", "pass"),
        (TRITON_LOG + DEFAULT_TILES, "E=128,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", "FAIL"),
        (TRITON_LOG + DEFAULT_TILES, "", ""),
        ("INFO Using FLASHINFER_CUTLASS Fp8 MoE backend out of potential backends: ['FLASHINFER_CUTLASS'].\n",
         "E=128,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", ""),
    ],
    ids=["Triton on a shipped file, no warning", "Triton warns although the file is shipped",
         "no file shipped for this split: nothing to check", "not Triton: nothing to check"],
)  # fmt: skip
def test_the_default_moe_config_check(log: str, shipped: str, check: str) -> None:
    assert report.default_config_check(_result(log, []), shipped) == check


@pytest.mark.parametrize(
    ("gpu", "check"),
    [("NVIDIA H200", "FAIL"), ("NVIDIA H100 80GB HBM3", "")],
    ids=["the shipped file's GPU: vLLM should have read it", "another GPU: vLLM's default tiles are expected"],
)
def test_the_default_moe_config_check_applies_only_on_the_shipped_files_gpu(gpu: str, check: str) -> None:
    # 2026-12-05e (an H100) marked the plan's rows FAIL: the H200's file cannot be read there
    result = _result(TRITON_LOG + DEFAULT_TILES, [])
    result.versions = {"gpu": gpu}
    assert report.default_config_check(result, "E=128,N=1856,device_name=NVIDIA_H200,dtype=fp8_w8a8.json") == check


def test_a_row_carries_split_options_comm_settings_and_jit_per_rank() -> None:
    log = TRITON_LOG + "(Worker_TP0) INFO vLLM is using nccl==2.28.9\n"
    log += "NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"
    events = [
        {"event": "first_request", "triton_compiled_at_start": {"fused_moe_kernel": 2},
         "triton_compiled_at_start_by_rank": {"rank_1_0": {"fused_moe_kernel": 2}},
         "rank_cache_dirs": ["rank_0_0", "rank_1_0"]},
        {"event": "serving_compiles", "triton_compiled_while_serving": {"_topk_topp_kernel": 1},
         "triton_compiled_while_serving_by_rank": {"rank_0_0": {"_topk_topp_kernel": 1}}},
    ]  # fmt: skip
    (row,) = report.build_rows(
        model="m", layers=1, layers_real=1, setup=EngineSetup("plan", "triton"), result=_result(log, events),
        warm_start_s=None, workloads=(spec.Workload(512, 256, 1),), compile_mode="default", timestamp="t",
        facts={"split": "tp2", "options": "tensor_parallel_degree=2", "tuned_file_shipped": "f.json",
               "comm_env": "NCCL_NVLS_ENABLE=0"},
    )  # fmt: skip
    assert (row["split"], row["options"], row["default_config_check"]) == ("tp2", "tensor_parallel_degree=2", "pass")
    assert row["triton_jit_at_start"] == 2 and row["moe_jit_at_start_by_rank"] == "rank_0_0:0;rank_1_0:2"
    assert row["moe_jit_while_serving"] == 0 and row["moe_jit_while_serving_by_rank"] == "rank_0_0:0;rank_1_0:0"
    assert row["comm_logged"] == "nccl=2.28.9;nccl_env=NCCL_NVLS_ENABLE=0" and row["comm_env"] == "NCCL_NVLS_ENABLE=0"


def test_vllms_and_ncclls_communication_lines_are_read() -> None:
    log = "\n".join([
        "(Worker_TP3 pid=9) INFO [pynccl.py:113] vLLM is using nccl==2.28.9",
        "h:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.",
        "h:1:1 [0] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.",
        "INFO [flashinfer_all_reduce.py:108] Using flashinfer allreduce backend: trtllm",
        "WARNING [symm_mem.py:106] SymmMemCommunicator: symmetric memory multicast operations are not supported.",
    ])  # fmt: skip
    assert logparse.comm_facts(log) == {
        "nccl": "2.28.9", "flashinfer_allreduce": "trtllm",
        "symm_mem": "symmetric memory multicast operations are not supported",
        "nccl_env": "NCCL_CUMEM_ENABLE=0,NCCL_NVLS_ENABLE=0",
    }  # fmt: skip
    assert EngineLog().comm == {}


def test_jit_is_counted_per_rank_from_vllms_per_rank_caches(tmp_path: Path) -> None:
    def binary(rank: str, key: str, name: str) -> None:
        folder = tmp_path / "vllm" / "torch_compile_cache" / "abc" / rank / "triton_cache" / key
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text("{}")
        (folder / f"{name}.cubin").write_bytes(b"")

    (tmp_path / "vllm" / "torch_compile_cache" / "abc" / "rank_1_0" / "triton_cache").mkdir(parents=True)
    before = jitcount.compiled_kernels([tmp_path])
    binary("rank_0_0", "h1", "fused_moe_kernel")
    binary("rank_0_0", "h2", "fused_moe_kernel")
    binary("rank_0_0", "h3", "_topk_topp_kernel")
    after = jitcount.compiled_kernels([tmp_path])
    by_rank = after.new_by_rank(before)
    assert by_rank == {"rank_0_0": {"_topk_topp_kernel": 1, "fused_moe_kernel": 2}}
    assert jitcount.rank_dirs([tmp_path]) == ["rank_0_0", "rank_1_0"]
    assert jitcount.moe_kernels_by_rank(by_rank, jitcount.rank_dirs([tmp_path])) == "rank_0_0:2;rank_1_0:0"


def test_ratios_compare_within_one_split() -> None:
    def row(backend: str, split: str, tps: float) -> dict[str, object]:
        return {"model": "m", "split": split, "options": "", "backend": backend, "input_len": 512,
                "output_len": 256, "conc": 1, "decode_tps_best": tps, "spread_pct": 0.0}  # fmt: skip

    rows = [row("auto", "tp8", 100.0), row("plan", "tp8", 110.0), row("auto", "tp4", 50.0), row("plan", "tp4", 40.0)]
    report.add_ratios(rows)
    assert [r["ratio_vs_auto"] for r in rows] == [1.0, 1.1, 1.0, 0.8]
