"""benchmarks.e2e.profile_trace on a trace built like a torch profiler's (kineto's Chrome format): decode steps found by
their CUDA graph replay, kernels classed by name, busy time and gaps per step, the odd replays dropped."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from benchmarks.e2e import profile_trace

# one decode step's graph: (name, offset µs, duration µs) - the MoE GEMM of vLLM, attention, a norm, a dense GEMM
GRAPH = [("fused_moe_kernel", 0.0, 20.0), ("flash_fwd_splitkv_kernel", 25.0, 10.0), ("rms_norm_kernel", 40.0, 2.0),
         ("nvjet_tst_128x64_64x4", 45.0, 15.0)]  # fmt: skip
STEP_US = 100.0


def trace(steps: int = 5, prefill_kernels: int = 9, step_us: float = STEP_US) -> list[dict]:
    events, corr, t = [], 1000, 0.0

    def replay(kernels: list[tuple[str, float, float]]) -> None:
        nonlocal corr
        corr += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t - 5, "dur": 3,
                       "args": {"correlation": corr}})  # fmt: skip
        for name, offset, dur in kernels:
            events.append({"ph": "X", "cat": "kernel", "name": name, "ts": t + offset, "dur": dur,
                           "args": {"correlation": corr}})  # fmt: skip

    replay([("fused_moe_kernel", i * 10.0, 8.0) for i in range(prefill_kernels)])  # prefill: another graph
    t += 200.0
    for _ in range(steps):
        replay(GRAPH)
        # an eager sampling kernel between two replays (its own launch, not a graph's), overlapping nothing
        events.append({"ph": "X", "cat": "kernel", "name": "topk_topp_sampler", "ts": t + 70.0, "dur": 5.0,
                       "args": {"correlation": 1}})  # fmt: skip
        t += step_us
    events.append({"ph": "i", "name": "marker", "ts": 0})  # not a complete event: ignored
    return events


def test_steps_are_graph_replays_with_the_eager_kernels_that_follow_them() -> None:
    steps, dropped = profile_trace.steps_of(trace(steps=5))
    assert dropped == 2  # the prefill graph (9 kernels) and the last step (no next replay ends it)
    assert len(steps) == 4
    step = steps[0]
    assert step.span_us == STEP_US and len(step.kernels) == 5
    assert step.busy_us() == pytest.approx(20 + 10 + 2 + 15 + 5)
    assert step.by_class() == {"moe_gemm_vllm": (1, 20.0, 20.0), "attention": (1, 10.0, 10.0), "norm": (1, 2.0, 2.0),
                               "dense_gemm": (1, 15.0, 15.0), "sampling": (1, 5.0, 5.0)}  # fmt: skip


def test_vllms_step_annotations_mark_the_decode_steps_of_the_profiled_batch() -> None:
    # vLLM 0.32 names each step execute_context_<n>(<tokens>)_generation_<m>(<m>) (seen in the CPU engine's trace);
    # on a GPU the profiler puts that range on the GPU timeline as a gpu_user_annotation
    events = [e for e in trace(steps=4) if e.get("name") != "cudaGraphLaunch"]  # no graph needed here
    t0 = 200.0

    def annotation(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "ts": ts, "dur": dur}

    events.append(annotation("execute_context_1(16)_generation_0(0)", 0.0, 150.0))  # the prefill
    events += [annotation("execute_context_0(0)_generation_1(1)", t0 + i * STEP_US, 80.0) for i in range(3)]
    events.append(annotation("execute_context_0(0)_generation_2(2)", t0 + 3 * STEP_US, 80.0))  # another batch
    steps, dropped = profile_trace.steps_of(events)
    assert len(steps) == 3 and dropped == 2 and {s.batch for s in steps} == {1}
    assert steps[0].span_us == 80.0 and len(steps[0].kernels) == 5  # the graph's 4 and the sampler at +70
    assert steps[0].span_us - steps[0].busy_us() == pytest.approx(80.0 - 52.0)


def test_a_steps_annotation_cut_into_fragments_is_one_step() -> None:
    # Nemotron-3-Nano on an H100 (2026-12-05e): the profiler cut each step's GPU range into 24 fragments, all with the
    # step's External id; read one by one they made 744 "steps" of 15 kernels
    events = trace(steps=4)
    t0 = 200.0

    def fragment(ext: int, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "gpu_user_annotation", "name": "execute_context_0(0)_generation_1(1)", "ts": ts,
                "dur": dur, "args": {"External id": ext}}  # fmt: skip

    for i in range(3):
        start = t0 + i * STEP_US
        # the host's 10 µs before the graph's first kernel, then the graph and the sampler
        events += [fragment(100 + i, start - 10.0, 40.0), fragment(100 + i, start + 40.0, 40.0)]
        # the step on the host thread: 30 µs holding the graph's launch (3 µs at start - 5, trace())
        events.append({"ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_1(1)",
                       "ts": start - 20.0, "dur": 30.0, "args": {"External id": 100 + i}})  # fmt: skip
    steps, dropped = profile_trace.steps_of(events)
    assert len(steps) == 3 and dropped == 0
    assert steps[0].span_us == 90.0 and len(steps[0].kernels) == 5  # as one range of 90 µs
    assert steps[1].start_us == t0 + STEP_US - 10.0
    assert [s.before_graph_us for s in steps] == [10.0, 10.0, 10.0]
    assert [(s.host_us, s.graph_launch_us) for s in steps] == [(30.0, 3.0)] * 3
    totals = profile_trace.summarise(steps)[1]
    assert (totals["before_graph_us"], totals["host_step_us"], totals["graph_launch_us"]) == (10.0, 30.0, 3.0)


def test_a_fragment_without_an_id_stays_a_step_and_a_kernel_without_a_correlation_is_no_graphs() -> None:
    events = [e for e in trace(steps=2) if e.get("cat") != "kernel" or e["name"] != "topk_topp_sampler"]
    events.append({"ph": "X", "cat": "kernel", "name": "eager_copy", "ts": 195.0, "dur": 1.0, "args": None})
    events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "execute_context_0(0)_generation_1(1)",
                   "ts": 190.0, "dur": 80.0, "args": None})  # fmt: skip
    steps, dropped = profile_trace.steps_of(events)
    assert len(steps) == 1 and dropped == 0
    assert steps[0].before_graph_us == 10.0  # the graph starts at 200; the copy at 195 has no correlation
    assert steps[0].host_us is None  # no CPU-side annotation to match


def test_overlapping_kernels_count_once_in_the_busy_time() -> None:
    step = profile_trace.Step(0.0, 100.0, [("a", 0.0, 30.0), ("b", 10.0, 30.0), ("c", 90.0, 20.0)])
    assert step.busy_us() == pytest.approx(40.0 + 10.0)  # 0-40, then 90-100 (cut at the step's end)


def test_a_kernel_launched_under_pdl_is_charged_only_past_its_predecessor() -> None:
    """2026-12-05b's trace: our GEMM2 starts 3.8 µs after GEMM1 (PDL) and waits; its 13.9 µs duration repeats 7.4 µs
    of GEMM1's 11.2. The class sum then said ~24 µs per MoE layer where GEMM1's start to GEMM2's end is 17.7."""
    step = profile_trace.Step(0.0, 30.0, [("moe_gemm2_kernel", 3.8, 13.9), ("moe_gemm1_kernel", 0.0, 11.2)])
    assert step.exclusive() == [("moe_gemm1_kernel", 11.2), ("moe_gemm2_kernel", pytest.approx(6.5))]
    count, durations, exclusive = step.by_class()["moe_gemm_ours"]
    assert (count, durations) == (2, pytest.approx(25.1)) and exclusive == pytest.approx(17.7) == step.busy_us()
    (row,) = profile_trace.summarise([step])[0]
    assert row.exclusive_us_per_step == pytest.approx(17.7) and row.share == pytest.approx(1.0)


def test_the_summary_has_per_class_medians_and_the_gap(tmp_path: Path) -> None:
    path = tmp_path / "rank0.pt.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": trace(steps=6)}, f)
    csv_path, md_path = tmp_path / "steps.csv", tmp_path / "steps.md"
    assert (
        profile_trace.main([str(path), "--label", "conc 1", "--out-csv", str(csv_path), "--out-md", str(md_path)]) == 0
    )
    md = md_path.read_text()
    assert "5 decode steps of 0 requests (2 other steps dropped" in md and "5 kernels" in md
    assert "gaps 48 µs (48 % of" in md
    assert "| moe_gemm_vllm | 1 | 20.0 | 20.0 | 38.5 % |" in md
    assert csv_path.read_text().splitlines()[0].startswith("trace,kernel_class,kernels_per_step,us_per_step,share")


def test_the_overview_tells_a_slow_batch_by_its_gaps_not_its_kernels(tmp_path: Path) -> None:
    """Two batches of one engine, one with every step 50 µs longer on the host: the overview's first line per trace
    shows the same GPU busy time and the longer gaps (Nemotron's jittering repetitions, docs/results/nemotron.md)."""
    paths = []
    for name, step_us in (("fast", STEP_US), ("slow", STEP_US + 50.0)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"traceEvents": trace(steps=6, step_us=step_us)}))
    md_path, csv_path = tmp_path / "steps.md", tmp_path / "steps.csv"
    labels = ["--label", "plan conc1-rep1", "--label", "plan conc1-rep2"]
    assert profile_trace.main([*map(str, paths), *labels, "--out-csv", str(csv_path), "--out-md", str(md_path)]) == 0
    overview = md_path.read_text().split("### ")[0]
    # the largest gap: the host's wait for the next step (75-100 µs, then 75-150), not the launch gaps inside
    assert "| plan conc1-rep1 | 5 | 100 (100–100) | 52 (52–52) | 48 (48 %) | 25 | – | 5 |" in overview, overview
    assert "| plan conc1-rep2 | 5 | 150 (150–150) | 52 (52–52) | 98 (65 %) | 75 | – | 5 |" in overview, overview
    header = csv_path.read_text().splitlines()[0]
    assert "step_span_min_us,step_span_max_us,step_busy_min_us,step_busy_max_us" in header


def test_the_summary_names_every_kernel_with_its_class(tmp_path: Path) -> None:
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": trace(steps=6)}))
    names_csv, md_path = tmp_path / "names.csv", tmp_path / "steps.md"
    out = ["--out-csv", str(tmp_path / "s.csv"), "--out-md", str(md_path), "--out-names-csv", str(names_csv)]
    assert profile_trace.main([str(path), *out]) == 0
    md = md_path.read_text()
    assert "Kernels by name, the 5 largest of 5" in md
    assert "| `fused_moe_kernel` | moe_gemm_vllm | 1.0 | 20.0 | 20.0 |" in md
    assert "| `flash_fwd_splitkv_kernel` | attention | 1.0 | 10.0 | 10.0 |" in md
    rows = names_csv.read_text().splitlines()
    assert rows[0] == "trace,name,kernel_class,kernels_per_step,us_per_step,exclusive_us_per_step" and len(rows) == 6


def test_a_long_kernel_name_is_shortened() -> None:
    name = "void cutlass::device_kernel<" + "x" * 300 + ">"
    short = profile_trace.short_name(name)
    assert short.startswith("cutlass::device_kernel<") and len(short) == profile_trace.NAME_CHARS


def test_a_trace_without_graph_replays_says_why(tmp_path: Path) -> None:
    path = tmp_path / "eager.json"
    path.write_text(
        json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "args": {"correlation": 5}}])
    )
    out = ["--out-csv", str(tmp_path / "a.csv"), "--out-md", str(tmp_path / "a.md")]
    assert profile_trace.main([str(path), *out]) == 1


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("moe_gemm1_kernel", "moe_gemm_ours"),
        ("moe_sum_kernel", "moe_sum"),
        ("fused_moe_kernel", "moe_gemm_vllm"),
        ("void vllm::moe::topkGatingSoftmax<8>", "moe_routing"),
        ("moe_route_kernel", "moe_routing"),
        ("bf16x3_router_gemm_kernel", "router_gemm"),
        ("kernel_cutlass_kernel_LLBf16Dotprod_object_at_0x7f", "router_gemm"),  # CuTe DSL names it by its class
        (
            "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>",
            "routing_simulator",
        ),
        ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>", "routing_simulator"),
        ("uniform_route_kernel", "routing_simulator"),  # ours, one launch per layer (benchmarks/e2e/uniform_route.py)
        ("uniform_route_floyd_kernel", "routing_simulator"),  # its Floyd sampler (2026-12-05 on)
        ("act_and_mul_kernel<silu>", "activation"),
        ("scaled_fp8_quant_kernel", "quant"),
        ("void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>", "quant"),
        # vLLM's CUTLASS FP8 GEMM: "fp8" in its template name, a GEMM all the same (2026-12-05 had it as quant)
        ("void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t>>", "dense_gemm"),
        ("flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits>", "attention"),  # "splitk" is a GEMM word too
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),  # Inductor's RMSNorm
        ("triton_poi_fused_add_rms_norm_0", "norm"),
        # Inductor names a fused kernel by the ops of its graph, the GEMM it feeds included (2026-12-05b): a norm
        # with the next GEMM's input quantisation, and the quantisation alone, are no GEMMs
        ("triton_red_fused__to_copy_clamp_cutlass_scaled_mm_fused_add_rms_norm_mul_reciprocal_2", "norm"),
        ("triton_poi_fused__to_copy_clamp_cutlass_scaled_mm_mul_reciprocal_view_0", "quant"),
        ("triton_poi_fused__to_copy_clamp_mul_reciprocal_0", "quant"),
        ("triton_red_fused_fused_add_rms_norm_moe_forward_1", "norm"),
        ("nvjet_tst_64x8_64x16_4x1_v_bz_TNN", "dense_gemm"),
        ("topk_topp_sampler", "sampling"),
        ("something_else", "other"),
    ],
)
def test_kernel_names_map_to_their_class(name: str, cls: str) -> None:
    assert profile_trace.kernel_class(name) == cls


def test_the_timeline_lists_the_median_steps_kernels_in_order(tmp_path: Path) -> None:
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": trace(steps=6)}))
    timeline = tmp_path / "timeline.csv"
    out = [
        "--out-csv",
        str(tmp_path / "s.csv"),
        "--out-md",
        str(tmp_path / "s.md"),
        "--out-timeline-csv",
        str(timeline),
    ]
    assert profile_trace.main([str(path), "--label", "plan conc1", *out]) == 0
    rows = list(csv.DictReader(timeline.open()))
    assert [(r["name"], r["start_us"], r["duration_us"], r["exclusive_us"]) for r in rows] == [
        ("fused_moe_kernel", "0.0", "20.0", "20.0"), ("flash_fwd_splitkv_kernel", "25.0", "10.0", "10.0"),
        ("rms_norm_kernel", "40.0", "2.0", "2.0"), ("nvjet_tst_128x64_64x4", "45.0", "15.0", "15.0"),
        ("topk_topp_sampler", "70.0", "5.0", "5.0"),
    ]  # fmt: skip
    assert {r["trace"] for r in rows} == {"plan conc1"} and rows[0]["kernel_class"] == "moe_gemm_vllm"
