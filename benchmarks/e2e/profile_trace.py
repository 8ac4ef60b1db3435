"""Where a decode step's GPU time goes: one torch-profiler trace of the served engine, per step (issue 33).

    python -m benchmarks.e2e.profile_trace TRACE.json.gz [...] --out-csv steps.csv --out-md steps.md

The trace is what vLLM's torch profiler writes (`--profiler-config '{"profiler": "torch", ...}'`, between POST
/start_profile and /stop_profile; `benchmarks/device/e2e.sh profile` makes them, benchmarks/e2e/profile_capture.py).
Decode steps: vLLM 0.32's model runner wraps each step in a record_function named
`execute_context_<n>(<tokens>)_generation_<m>(<m>)` (seen in the CPU engine's traces); on a GPU the profiler maps it
onto the GPU timeline as a `gpu_user_annotation`. A step with no context (prefill) request is a decode step of m
requests; its kernels are those that start inside its GPU range. A trace without those annotations falls back to
CUDA graph replays: every kernel whose `correlation` names one `cudaGraphLaunch` is one replay, and a step runs from
its replay's first kernel to the next one's (the eager kernels in between count in the step they follow; replays
with an unusual kernel count, prefill and the last one, are dropped and counted). Per step: the kernels, their busy
time by class (CLASSES, matched on the kernel name), and the gap, the step's span less the time any kernel ran.
Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# (class, pattern on the kernel name), first match wins; "other" for the rest
CLASSES: tuple[tuple[str, str], ...] = (
    # Inductor's fused kernels carry the ops of their graph in their names, the GEMM they feed included
    # (`triton_poi_fused__to_copy_clamp_cutlass_scaled_mm_mul_reciprocal_view_0` quantises a GEMM's input: x / scale,
    # clamped to FP8's range): first, by what they compute
    ("norm", r"^triton_\w*fused\w*(rms_norm|rsqrt)"),
    ("quant", r"^triton_\w*fused\w*(clamp\w*reciprocal|reciprocal\w*clamp)"),
    ("moe_gemm_ours", r"moe_gemm[12]_kernel"),
    ("moe_sum", r"moe_sum"),
    ("moe_gemm_vllm", r"fused_moe_kernel"),
    ("sampling", r"sampl|top_?p\b|topp|argmax|penalt|logprob"),
    ("router_gemm", r"router_gemm|gate_linear|ll_?bf16"),  # x · W_gate (gate_linear.py; on SM90 the CuTe DSL LLBf16*)
    # vLLM's routing simulator (torch.rand, torch.topk) and ours (benchmarks/e2e/uniform_route.py): in benchmark rows
    # only, never in production
    ("routing_simulator", r"distribution_elementwise|philox|gatherTopK|sbtopk|bitonicSort|radixSort|uniform_route"),
    ("moe_routing", r"topkgating|topk_softmax|moe_align|count_and_sort|grouped_topk|fused_topk|rout|expert"),
    ("activation", r"silu|act_and_mul|gelu|relu"),
    # before dense_gemm: FlashAttention's split-KV kernels contain "splitk"
    ("attention", r"flash|fmha|attn|attention|paged|mla"),
    # before quant: vLLM's CUTLASS FP8 GEMMs carry "fp8" in their template names (2026-12-05's first profile counted
    # the qkv / o_proj GEMMs as quantisation because quant came first and matched "fp8")
    ("dense_gemm", r"gemm|gemv|sm90_|cutlass|cublas|nvjet|xmma|matmul|splitk"),
    ("quant", r"quant|fp8|per_token"),
    ("norm", r"rms|norm|rsqrt"),  # Inductor names a fused RMSNorm by its ops (…_mean_mul_pow_rsqrt_…)
    ("rope", r"rotary|rope"),
    ("communication", r"nccl|all_reduce|allreduce|cross_device"),
    ("copy", r"memcpy|memset|copy|fill|index|cat|elementwise"),
)
_COMPILED = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in CLASSES)


def kernel_class(name: str) -> str:
    for cls, pattern in _COMPILED:
        if pattern.search(name):
            return cls
    return "other"


@dataclass
class Step:
    """One decode step: its kernels (name, start µs, duration µs) and its span."""

    start_us: float
    end_us: float
    kernels: list[tuple[str, float, float]] = field(default_factory=list)
    batch: int | None = None  # requests decoded in the step, where vLLM's annotation says
    graph_start_us: float | None = None  # the step's first kernel of a CUDA graph replay (annotated steps only)
    host_us: float | None = None  # the step's range on the host thread (vLLM's annotation on the CPU side)
    graph_launch_us: float | None = None  # host time inside cudaGraphLaunch calls within that range

    @property
    def before_graph_us(self) -> float | None:
        """From the step's start to its graph's first kernel: the host preparing the step's inputs, with the few
        eager kernels that takes. Long against the graph's own time means the host, not the GPU, sets the step."""
        return None if self.graph_start_us is None else self.graph_start_us - self.start_us

    @property
    def span_us(self) -> float:
        return self.end_us - self.start_us

    def timeline(self) -> list[tuple[str, float, float, float]]:
        """(name, start µs, duration µs, exclusive µs) per kernel in start order; exclusive: each instant of busy time
        given to the kernel that started first.

        Kernels overlap where one launches under programmatic dependent launch (our GEMM2 behind GEMM1, FlashAttention's
        combine behind its main kernel): the later one starts early and waits. Its duration then repeats time the
        earlier one spent, so durations add up to more than the step; the exclusive shares add up to the busy time."""
        out, reach = [], self.start_us
        for name, start, dur in sorted(self.kernels, key=lambda k: k[1]):
            end = min(start + dur, self.end_us)
            out.append((name, start, dur, max(0.0, end - max(start, reach))))
            reach = max(reach, end)
        return out

    def exclusive(self) -> list[tuple[str, float]]:
        """(name, exclusive µs) per kernel in start order (timeline)."""
        return [(name, excl) for name, _, _, excl in self.timeline()]

    def busy_us(self) -> float:
        """Time at least one kernel ran (overlaps counted once)."""
        return sum(us for _, us in self.exclusive())

    def largest_gap_us(self) -> float:
        """The longest stretch with no kernel running, the step's start and end included: one long wait per step (the
        host late with the next graph launch) against many short ones (launch gaps inside a graph)."""
        longest, reach = 0.0, self.start_us
        for _, start, dur in sorted(self.kernels, key=lambda k: k[1]):
            longest = max(longest, start - reach)
            reach = max(reach, min(start + dur, self.end_us))
        return max(longest, self.end_us - reach)

    def by_class(self) -> dict[str, tuple[int, float, float]]:
        """{class: (kernels, µs of their durations, µs exclusive)}."""
        out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for name, _, dur, excl in self.timeline():
            row = out[kernel_class(name)]
            row[0], row[1], row[2] = row[0] + 1, row[1] + dur, row[2] + excl
        return {cls: (int(n), us, excl) for cls, (n, us, excl) in out.items()}


def load_events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


DECODE_STEP = re.compile(r"execute_context_0\(0\)_generation_(\d+)\(\d+\)")


def steps_of(events: Iterable[dict[str, Any]]) -> tuple[list[Step], int]:
    """(decode steps, steps dropped) of one trace: by vLLM's step annotations, else by CUDA graph replays."""
    graph_calls: set[int] = set()
    launches: list[tuple[float, float]] = []  # (start, duration) of each cudaGraphLaunch on the host
    kernels: list[dict[str, Any]] = []
    annotated: list[dict[str, Any]] = []
    host: dict[Any, dict[str, Any]] = {}  # External id → the step's CPU-side annotation
    for e in events:
        if e.get("ph") != "X":
            continue
        step_name = str(e.get("name", "")).startswith("execute_context_")
        if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaGraphLaunch":
            if (corr := _correlation(e)) >= 0:
                graph_calls.add(corr)
            launches.append((float(e["ts"]), float(e.get("dur", 0.0))))
        elif e.get("cat") == "kernel":
            kernels.append(e)
        elif e.get("cat") == "gpu_user_annotation" and step_name:
            annotated.append(e)
        elif e.get("cat") == "user_annotation" and step_name and _external_id(e) is not None:
            host[_external_id(e)] = e
    kernels.sort(key=lambda e: float(e["ts"]))
    if annotated:
        return _annotated_steps(annotated, kernels, graph_calls, host, launches)
    return _replay_steps(graph_calls, kernels)


def _external_id(event: dict[str, Any]) -> Any:
    return (event.get("args") or {}).get("External id")


def _add_host_side(step: Step, cpu: dict[str, Any] | None, launches: Sequence[tuple[float, float]]) -> None:
    """The step's host range (its CPU-side annotation, `cpu`; None: the trace has none) and the graph launches in it."""
    if cpu is None:
        return
    start, end = float(cpu["ts"]), float(cpu["ts"]) + float(cpu.get("dur", 0.0))
    step.host_us = end - start
    step.graph_launch_us = sum(dur for ts, dur in launches if start <= ts < end)


def _correlation(event: dict[str, Any]) -> int:
    """The event's correlation id, -1 where it has none (never taken as a graph's)."""
    return int((event.get("args") or {}).get("correlation", -1))


def _inside(kernels: list[dict[str, Any]], start: float, end: float) -> list[tuple[str, float, float]]:
    return [(k["name"], float(k["ts"]), float(k["dur"])) for k in kernels if start <= float(k["ts"]) < end]


def _whole_annotations(fragments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One GPU range per step. The profiler may cut a step's range into fragments, one per stretch of kernels, all
    with the step's External id: Nemotron-3-Nano's steps came in 24 of ~58 µs each (H100, 2026-12-05e), and each
    fragment read as a step gave 744 "steps" of 15 kernels. Fragments of one id become the range from the first's
    start to the last's end; a fragment without an id stays alone."""
    by_id: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    whole = []
    for e in fragments:
        ext = _external_id(e)
        if ext is None:
            whole.append(e)
        else:
            by_id[ext].append(e)
    for group in by_id.values():
        start = min(float(e["ts"]) for e in group)
        end = max(float(e["ts"]) + float(e["dur"]) for e in group)
        whole.append({**group[0], "ts": start, "dur": end - start})
    return sorted(whole, key=lambda e: float(e["ts"]))


def _annotated_steps(
    fragments: list[dict[str, Any]],
    kernels: list[dict[str, Any]],
    graph_calls: Set[int],
    host: Mapping[Any, dict[str, Any]],
    launches: Sequence[tuple[float, float]],
) -> tuple[list[Step], int]:
    """Decode steps of the most common batch size (the profiled concurrency); other steps dropped and counted."""
    annotated = _whole_annotations(fragments)
    decode = [(e, int(m.group(1))) for e in annotated if (m := DECODE_STEP.fullmatch(str(e["name"])))]
    if not decode:
        return [], len(annotated)
    batch = Counter(b for _, b in decode).most_common(1)[0][0]
    steps = []
    for e, b in decode:
        if b != batch:
            continue
        start = float(e["ts"])
        step = Step(start, start + float(e["dur"]), batch=b)
        inside = [k for k in kernels if start <= float(k["ts"]) < step.end_us]
        step.kernels = [(k["name"], float(k["ts"]), float(k["dur"])) for k in inside]
        step.graph_start_us = next((float(k["ts"]) for k in inside if _correlation(k) in graph_calls), None)
        _add_host_side(step, host.get(_external_id(e)), launches)
        steps.append(step)
    return steps, len(annotated) - len(steps)


def _replay_steps(graph_calls: Set[int], kernels: list[dict[str, Any]]) -> tuple[list[Step], int]:
    replays: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in kernels:
        corr = int(e.get("args", {}).get("correlation", -1))
        if corr in graph_calls:
            replays[corr].append(e)
    firsts = sorted((min(float(k["ts"]) for k in ks), corr) for corr, ks in replays.items())
    if not firsts:
        return [], 0
    typical = Counter(len(replays[corr]) for _, corr in firsts).most_common(1)[0][0]
    steps, dropped = [], 0
    for i, (start, corr) in enumerate(firsts):
        end = firsts[i + 1][0] if i + 1 < len(firsts) else max(float(k["ts"]) + float(k["dur"]) for k in kernels)
        if len(replays[corr]) != typical or i + 1 == len(firsts):  # the last step has no next replay to end it
            dropped += 1
            continue
        step = Step(start, end)
        step.kernels = _inside(kernels, start, end)
        steps.append(step)
    return steps, dropped


@dataclass(frozen=True)
class ClassRow:
    kernel_class: str
    kernels_per_step: float
    us_per_step: float  # the kernels' durations (overlapping ones each count whole)
    share: float  # of the step's busy time, by exclusive_us_per_step
    exclusive_us_per_step: float  # overlaps given to the kernel that started first (Step.exclusive)


def _median_known(values: Sequence[float | None]) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else -1.0


def summarise(steps: Sequence[Step]) -> tuple[list[ClassRow], dict[str, float]]:
    """Per class: median kernels and µs per step; and the step totals (medians)."""
    if not steps:
        raise ValueError("no decode step found: no GPU kernel inside vLLM's step annotations or CUDA graph replays")
    per_step = [s.by_class() for s in steps]
    classes = sorted({cls for c in per_step for cls in c})
    spans, busies = [s.span_us for s in steps], [s.busy_us() for s in steps]
    busy = statistics.median(busies)
    rows = []
    for cls in classes:
        counts = [c.get(cls, (0, 0.0, 0.0)) for c in per_step]
        us, excl = statistics.median(c[1] for c in counts), statistics.median(c[2] for c in counts)
        rows.append(ClassRow(cls, statistics.median(c[0] for c in counts), us, excl / busy if busy else 0.0, excl))
    rows.sort(key=lambda r: -r.exclusive_us_per_step)
    span = statistics.median(spans)
    totals = {
        "steps": float(len(steps)),
        "kernels_per_step": statistics.median(len(s.kernels) for s in steps),
        "batch": float(steps[0].batch or 0),
        "span_us": span,
        "busy_us": busy,
        "gap_us": statistics.median(sp - b for sp, b in zip(spans, busies, strict=True)),
        "largest_gap_us": statistics.median(s.largest_gap_us() for s in steps),
        # -1 below: no step of the trace has it (replay-split steps start at their graph by construction; a trace
        # without CPU-side step annotations has no host range)
        "host_step_us": _median_known([s.host_us for s in steps]),
        "graph_launch_us": _median_known([s.graph_launch_us for s in steps]),
        "before_graph_us": _median_known([s.before_graph_us for s in steps]),
        "span_min_us": min(spans),
        "span_max_us": max(spans),
        "busy_min_us": min(busies),
        "busy_max_us": max(busies),
    }
    return rows, totals


@dataclass(frozen=True)
class NameRow:
    name: str  # shortened to NAME_CHARS
    kernel_class: str
    kernels_per_step: float  # means over the steps: a name absent from some steps still counts
    us_per_step: float  # durations
    exclusive_us_per_step: float  # overlaps given to the kernel that started first


NAME_CHARS = 120  # enough to tell a CUTLASS GEMM's template from a quantisation kernel's
TOP_NAMES = 25


def short_name(name: str) -> str:
    name = name.removeprefix("void ")
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def by_name(steps: Sequence[Step]) -> list[NameRow]:
    """Every kernel name of the steps (shortened) with its class: what the class table sums, to check the classes."""
    count: Counter[str] = Counter()
    total: defaultdict[str, float] = defaultdict(float)
    exclusive: defaultdict[str, float] = defaultdict(float)
    full: dict[str, str] = {}  # short → a full name, classed as the class table classes it
    for step in steps:
        for name, _, dur, excl in step.timeline():
            short = short_name(name)
            count[short] += 1
            total[short] += dur
            exclusive[short] += excl
            full.setdefault(short, name)
    n = len(steps) or 1
    rows = [NameRow(short, kernel_class(full[short]), count[short] / n, total[short] / n, exclusive[short] / n)
            for short in count]  # fmt: skip
    return sorted(rows, key=lambda r: -r.exclusive_us_per_step)


def names_markdown(rows: Sequence[NameRow], top: int = TOP_NAMES) -> str:
    lines = [
        f"Kernels by name, the {min(top, len(rows))} largest of {len(rows)} (means per step):",
        "",
        "| kernel | class | per step | µs per step (durations) | µs exclusive |",
        "|---|---|---|---|---|",
    ]
    for r in rows[:top]:
        cell = r.name.replace("|", "\\|")
        lines.append(f"| `{cell}` | {r.kernel_class} | {r.kernels_per_step:.1f} | {r.us_per_step:.1f} "
                     f"| {r.exclusive_us_per_step:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def timeline_rows(label: str, steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The step of median span, one row per kernel in start order: offset from the step's start, duration, exclusive
    µs (Step.exclusive) and class."""
    step = sorted(steps, key=lambda s: s.span_us)[len(steps) // 2]
    return [
        {"trace": label, "index": i, "name": short_name(name), "kernel_class": kernel_class(name),
         "start_us": round(start - step.start_us, 2), "duration_us": round(dur, 2), "exclusive_us": round(excl, 2)}
        for i, (name, start, dur, excl) in enumerate(step.timeline())
    ]  # fmt: skip


def overview_markdown(traces: Sequence[tuple[str, dict[str, float]]]) -> str:
    """One line per trace: where batches of one engine differ (a slow one against a fast one), whether the GPU's
    busy time moved or the gaps between kernels did."""
    lines = [
        "| trace | steps | span µs, median (min–max) | GPU busy µs, median (min–max) | gaps µs (share) "
        "| largest gap µs | host before the graph µs | kernels |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, t in traces:
        lines.append(
            f"| {label} | {t['steps']:.0f} | {t['span_us']:.0f} ({t['span_min_us']:.0f}–{t['span_max_us']:.0f}) "
            f"| {t['busy_us']:.0f} ({t['busy_min_us']:.0f}–{t['busy_max_us']:.0f}) "
            f"| {t['gap_us']:.0f} ({100 * t['gap_us'] / t['span_us']:.0f} %) | {t['largest_gap_us']:.0f} "
            f"| {_before_graph(t)} | {t['kernels_per_step']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def _before_graph(totals: dict[str, float]) -> str:
    return "–" if totals.get("before_graph_us", -1.0) < 0 else f"{totals['before_graph_us']:.0f}"


def _host_side(totals: dict[str, float]) -> str:
    """The host thread's side of a step, where the trace has vLLM's CPU-side step annotations."""
    if totals.get("host_step_us", -1.0) < 0:
        return ""
    return (f" On the host thread: the step's range {totals['host_step_us']:.0f} µs, of which "
            f"{totals['graph_launch_us']:.0f} µs inside cudaGraphLaunch.")  # fmt: skip


def markdown(label: str, rows: Sequence[ClassRow], totals: dict[str, float], dropped: int) -> str:
    lines = [
        f"### {label}",
        "",
        f"{totals['steps']:.0f} decode steps of {totals['batch']:.0f} requests ({dropped} other steps dropped; 0: "
        f"not annotated); medians per step: "
        f"{totals['kernels_per_step']:.0f} kernels, span {totals['span_us']:.0f} µs, GPU busy "
        f"{totals['busy_us']:.0f} µs, gaps {totals['gap_us']:.0f} µs "
        f"({100 * totals['gap_us'] / totals['span_us']:.0f} % of the step; the largest one "
        f"{totals['largest_gap_us']:.0f} µs; the host before the graph's first kernel {_before_graph(totals)} µs)."
        + _host_side(totals),
        "",
        "µs exclusive: each instant of busy time given to the kernel that started first (a kernel launched under",
        "programmatic dependent launch starts early and waits: its duration repeats time its predecessor spent).",
        "",
        "| kernel class | kernels per step | µs per step (durations) | µs exclusive | share of busy time |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.kernel_class} | {r.kernels_per_step:.0f} | {r.us_per_step:.1f} | {r.exclusive_us_per_step:.1f} "
        f"| {100 * r.share:.1f} % |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.profile_trace", description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path, help="torch profiler traces (.json or .json.gz)")
    parser.add_argument("--label", action="append", default=[], help="one per trace (default: the file name)")
    parser.add_argument("--out-csv", type=Path, required=True)
    parser.add_argument("--out-md", type=Path, required=True)
    parser.add_argument("--out-names-csv", type=Path, help="every kernel name per trace, its class and µs per step")
    parser.add_argument("--out-timeline-csv", type=Path,
                        help="the first trace's median step, kernel by kernel: start, duration, exclusive µs (what a "
                             "layer's chain of kernels looks like)")  # fmt: skip
    args = parser.parse_args(argv)
    labels = args.label or [t.name for t in args.traces]
    if len(labels) != len(args.traces):
        parser.error(f"--label given {len(labels)} times for {len(args.traces)} traces")
    md, table, names, overview, timeline = [], [], [], [], []
    for label, trace in zip(labels, args.traces, strict=True):
        try:
            steps, dropped = steps_of(load_events(trace))
            rows, totals = summarise(steps)
        except (OSError, ValueError, KeyError) as exc:
            print(f"profile_trace: {trace}: {exc}", file=sys.stderr)
            return 1
        name_rows = by_name(steps)
        overview.append((label, totals))
        if args.out_timeline_csv and not timeline:
            timeline = timeline_rows(label, steps)
        md.append(markdown(label, rows, totals, dropped) + "\n" + names_markdown(name_rows))
        table += [{"trace": label, **r.__dict__, **{f"step_{k}": v for k, v in totals.items()}} for r in rows]
        names += [{"trace": label, **r.__dict__} for r in name_rows]
    _write_csv(args.out_csv, table)
    if args.out_names_csv:
        _write_csv(args.out_names_csv, names)
    if args.out_timeline_csv and timeline:
        _write_csv(args.out_timeline_csv, timeline)
    args.out_md.write_text("\n".join([overview_markdown(overview), *md]))
    print(f"profile_trace: wrote {args.out_csv} and {args.out_md}")
    return 0


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
