"""The router's top-k folded into our MoE kernels (issue 33, step 2) against the same kernels fed a router's output.

    python -m benchmarks.kernels.bench_moe_fold [--shapes qwen3-30b-a3b:tp1,...] [--ms 1,2,4,8] [--reps 3]

Per shape and M, one CSV row (h200_moe_fold.csv and .md in the kernel results folder, or --out):
  kernels_us      fused_moe_fp8 fed precomputed ids and weights: our two kernels alone, no router (a floor);
  kernels_atomic_us  the same with the top-k sum by fp32 atomics (MoEKernelConfig.atomic_sum; PAIR mode, else the
                  same kernels): what the shipped deterministic sum costs is kernels_us − kernels_atomic_us;
  torch_route_us  the model's routing in torch ops (softmax or sigmoid, topk, gather, renormalise), then the kernels;
  vllm_route_us   vLLM's fused top-k (`topk_softmax` / `topk_sigmoid`, one kernel, what the served router launches),
                  then the kernels; empty where vLLM does not import;
  folded_us       fused_moe_fp8_from_logits: the routing inside both GEMMs, no router launch;
  vllm_route_pdl_us  vllm_route with our GEMM1 launched under PDL behind the top-k (MoEKernelConfig.pdl_gemm1): the
                  PDL alone (issue 33 step 3);
  router_vllm_us, router_folded_us, router_folded_pdl_us  the whole MoE block after the norm: the router GEMM
                  (`router_gemm`: vLLM's CuTe DSL ll_bf16 kernel, what GateLinear runs at M ≤ 16 on SM90, else
                  torch's), then vLLM's top-k + the kernels (today's block; empty for a biased router) / folded /
                  folded with GEMM1 under PDL behind the router GEMM;
  fold_gain       (vllm_route_us, else torch_route_us) ÷ folded_us;
  pdl_gain        router_folded_us ÷ router_folded_pdl_us; pdl_alone_gain vllm_route_us ÷ vllm_route_pdl_us;
  block_gain      router_vllm_us ÷ router_folded_pdl_us: the block with both against today's;
  prologue_us     folded_us − kernels_us: what routing inside every program costs the kernels;
  deterministic_cost_us  kernels_us − kernels_atomic_us;
  folded_rel_err  the folded layer against the kernels fed torch's routing of the same logits, first routing only
                  (a fold that routes wrongly shows here, not as a fast row).
Each column: the median of --reps timings, each tools/measure.graph_us over R calls on R different uniform routings
captured in one CUDA graph (weights from HBM; graph-short launch gaps, as a served decode step replays its graph),
with the spread (max − min) ÷ median beside it. Columns are timed in turn, rep by rep, so drift hits all alike.
The routing: random normal logits × 2 (uniform in distribution); the bias of sigmoid routers: random, ~0.1.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.paths import KERNEL_RESULTS
from kernels.tuning import moe_harness
from tools.measure import graph_us, hbm_read_gbs, run_preamble

SHAPES = ("qwen3-30b-a3b:tp1", "nemotron-3-nano-30b-a3b:tp1", "mixtral-8x7b:tp1")
BENCH_M = (1, 2, 4, 8)
# The routers of the shapes' models (config.json): scoring, renormalise, selection bias, routed scaling factor
ROUTERS: dict[str, tuple[str, bool, bool, float]] = {
    "nemotron-3-nano-30b-a3b": ("sigmoid", True, True, 2.5),
}
DEFAULT_ROUTER = ("softmax", True, False, 1.0)  # Qwen3 (norm_topk_prob), Mixtral
TIMED = (
    "kernels", "kernels_atomic", "torch_route", "vllm_route", "folded", "vllm_route_pdl", "router_vllm",
    "router_folded", "router_folded_pdl",
)  # fmt: skip
DERIVED = ("fold_gain", "pdl_gain", "pdl_alone_gain", "block_gain", "prologue_us", "deterministic_cost_us")
COLUMNS = (
    "gpu", "torch", "triton", "vllm", "timestamp", "hbm_read_gbs", "shape", "M", "scoring", "router_gemm",
    *(f"{c}_us" for c in TIMED), *(f"{c}_spread" for c in TIMED), *DERIVED, "folded_rel_err", "reps",
)  # fmt: skip


def vllm_topk() -> Callable[..., Any] | None:
    """vLLM's fused top-k (vllm._custom_ops.topk_softmax / topk_sigmoid), or None where vLLM does not import."""
    try:
        from vllm import _custom_ops as ops
    except Exception as exc:  # the GPU host may have no vLLM
        print(f"vLLM's top-k not available ({type(exc).__name__}: {exc}): vllm_route_us stays empty", file=sys.stderr)
        return None

    def topk(weights: torch.Tensor, ids: torch.Tensor, logits: torch.Tensor, scoring: str, renorm: bool) -> None:
        fn = ops.topk_softmax if scoring == "softmax" else ops.topk_sigmoid
        fn(weights, ids, torch.empty_like(ids), logits, renorm)

    return topk


def vllm_router_gemm() -> tuple[str, Callable[..., Any] | None]:
    """("ll_bf16", vLLM's CuTe DSL router GEMM) where it runs (SM90+ with the CuTe DSL: GateLinear's first tier at
    M ≤ 16), else ("torch", None)."""
    try:
        from vllm.model_executor.kernels.linear.cute_dsl.ll_bf16 import is_available, ll_bf16_gemm

        if is_available():
            return "ll_bf16", lambda x, w: ll_bf16_gemm(x, w, torch.float32)
    except Exception as exc:  # no vLLM or no CuTe DSL on this host
        print(f"vLLM's router GEMM not available ({type(exc).__name__}: {exc}): torch's runs", file=sys.stderr)
    return "torch", None


def torch_router_gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(M, E) float32 logits of a bf16 router: GEMM, then a cast (one kernel more than vLLM's fp32-out GEMM)."""
    return torch.nn.functional.linear(x, weight).float()


def torch_route(logits: torch.Tensor, k: int, scoring: str, renorm: bool, bias: torch.Tensor | None, scale: float):
    scores = logits.float().softmax(dim=-1) if scoring == "softmax" else logits.float().sigmoid()
    keys = scores + bias if bias is not None else scores
    ids = keys.topk(k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renorm:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return (weights * scale).contiguous(), ids.to(torch.int32).contiguous()


def bench_shape(
    s: Any, ms: tuple[int, ...], reps: int, topk_fn: Callable[..., Any] | None, *, device: str = "cuda",
    timer: Callable[..., float] = graph_us, router_gemm: tuple[str, Callable[..., Any] | None] = ("torch", None),
) -> list[dict]:  # fmt: skip
    """Rows for one KernelShape (kernels.shapes); `timer(run, calls=...)` → µs per call (tests pass a CPU one);
    router_gemm: (name, fn(x, weight) → float32 logits), None for torch's."""
    scoring, renorm, has_bias, scale = ROUTERS.get(s.model.name, DEFAULT_ROUTER)
    problem = moe_harness.PlainMoEProblem(s, device=device)
    act = "silu" if s.model.gated else "relu2"
    gen = torch.Generator(device=device).manual_seed(7)
    bias = torch.randn(s.e, device=device, generator=gen) * 0.1 if has_bias else None
    router = (scoring, renorm, bias, scale)
    gate = (torch.randn(s.e, s.h, device=device, generator=gen) * s.h**-0.5).to(torch.bfloat16)
    gemm = (router_gemm[0], router_gemm[1] or torch_router_gemm, gate)
    return [_bench_m(s.key, m, problem, act, router, reps, topk_fn, gen, timer, gemm) for m in ms]


def _bench_m(
    key: str, m: int, problem: Any, act: str, router: tuple, reps: int, topk_fn: Callable[..., Any] | None,
    gen: torch.Generator, timer: Callable[..., float], gemm: tuple[str, Callable[..., Any], torch.Tensor],
) -> dict[str, Any]:  # fmt: skip
    from ops.fused_moe_fp8 import call_config, default_config, fused_moe_fp8, fused_moe_fp8_from_logits
    from ops.moe_routing import LogitsRouting

    s, (scoring, renorm, bias, scale) = problem.shape, router
    w1, w2, scales = problem.w1, problem.w2, problem.scales
    batch = problem.inputs(m, moe_harness.rotations(s, m))
    logits = [torch.randn(m, s.e, device=gen.device, generator=gen).mul_(2).to(torch.bfloat16) for _ in batch]
    routed = [torch_route(lg, s.topk, scoring, renorm, bias, scale) for lg in logits]
    bufs = [(torch.empty_like(w), torch.empty_like(i)) for w, i in routed]
    xs = [x for x, _, _ in batch]

    def kernels() -> None:
        for x, (w, ids) in zip(xs, routed, strict=True):
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act)

    block_k = s.block_shape[1] if s.block_shape else 128
    atomic = dataclasses.replace(default_config(m, s.e, s.topk, s.h, s.n, block_k=block_k), atomic_sum=True)

    def kernels_atomic() -> None:
        for x, (w, ids) in zip(xs, routed, strict=True):
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act, config=atomic)

    def via_torch() -> None:
        for x, lg in zip(xs, logits, strict=True):
            w, ids = torch_route(lg, s.topk, scoring, renorm, bias, scale)
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act)

    def via_vllm() -> None:
        assert topk_fn is not None
        for x, lg, (w, ids) in zip(xs, logits, bufs, strict=True):
            topk_fn(w, ids, lg, scoring, renorm)
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act)

    def folded() -> None:
        for x, lg in zip(xs, logits, strict=True):
            routing = LogitsRouting(lg, s.topk, scoring, renorm, bias=bias, scale=scale)
            fused_moe_fp8_from_logits(x, w1, w2, routing, **scales, activation=act)

    pdl1 = dataclasses.replace(call_config(xs[0], w2, s.topk, s.block_shape), pdl_gemm1=True)
    gemm_name, router_gemm, gate = gemm

    def via_vllm_pdl() -> None:
        assert topk_fn is not None
        for x, lg, (w, ids) in zip(xs, logits, bufs, strict=True):
            topk_fn(w, ids, lg, scoring, renorm)
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act, config=pdl1)

    def router_vllm() -> None:
        assert topk_fn is not None
        for x, (w, ids) in zip(xs, bufs, strict=True):
            topk_fn(w, ids, router_gemm(x, gate), scoring, renorm)
            fused_moe_fp8(x, w1, w2, w, ids, **scales, activation=act)

    def router_folded(config: Any = None) -> Callable[[], None]:
        def run() -> None:
            for x in xs:
                routing = LogitsRouting(router_gemm(x, gate), s.topk, scoring, renorm, bias=bias, scale=scale)
                fused_moe_fp8_from_logits(x, w1, w2, routing, **scales, activation=act, config=config)

        return run

    routing0 = LogitsRouting(logits[0], s.topk, scoring, renorm, bias=bias, scale=scale)
    folded0, _, _ = fused_moe_fp8_from_logits(xs[0], w1, w2, routing0, **scales, activation=act)
    unfolded0 = fused_moe_fp8(xs[0], w1, w2, *routed[0], **scales, activation=act)
    rel = (folded0.double() - unfolded0.double()).norm() / unfolded0.double().norm().clamp_min(1e-30)
    runs = {"kernels": kernels, "kernels_atomic": kernels_atomic, "torch_route": via_torch, "folded": folded}
    if topk_fn is not None and bias is None:  # vLLM's topk_sigmoid has no selection bias: not the same work
        runs.update(vllm_route=via_vllm, vllm_route_pdl=via_vllm_pdl, router_vllm=router_vllm)
    runs.update(router_folded=router_folded(), router_folded_pdl=router_folded(pdl1))
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            times[name].append(timer(run, calls=len(xs)))
    row: dict[str, Any] = {
        "shape": key,
        "M": m,
        "scoring": scoring + ("+bias" if bias is not None else ""),
        "router_gemm": gemm_name,
        "reps": reps,
        "folded_rel_err": round(float(rel), 5),
    }
    for name, values in times.items():
        med = statistics.median(values)
        row[f"{name}_us"] = round(med, 2)
        row[f"{name}_spread"] = round((max(values) - min(values)) / med, 3)
    baseline = row.get("vllm_route_us", row["torch_route_us"])
    row["fold_gain"] = round(baseline / row["folded_us"], 3)
    row["prologue_us"] = round(row["folded_us"] - row["kernels_us"], 2)
    row["deterministic_cost_us"] = round(row["kernels_us"] - row["kernels_atomic_us"], 2)
    for name, (num, den) in GAINS.items():
        if f"{num}_us" in row and f"{den}_us" in row:
            row[name] = round(row[f"{num}_us"] / row[f"{den}_us"], 3)
    print(row, flush=True)
    return row


# the step-3 ratios (> 1: the second is faster): PDL on the folded block, PDL alone, both against today's block
GAINS = {
    "pdl_gain": ("router_folded", "router_folded_pdl"),
    "pdl_alone_gain": ("vllm_route", "vllm_route_pdl"),
    "block_gain": ("router_vllm", "router_folded_pdl"),
}


def _cell(r: dict, name: str) -> str:
    return f"{r[f'{name}_us']} ±{100 * r[f'{name}_spread']:.1f}%" if f"{name}_us" in r else ""


def markdown(rows: list[dict]) -> str:
    """Two tables: the fold against the kernels fed a router's top-k, then the whole block after the norm."""
    lines = [
        "| shape | M | scoring | kernels µs | atomic sum µs | torch route µs | vLLM route µs | folded µs | gain |"
        " prologue µs |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        cells = [_cell(r, c) for c in ("kernels", "kernels_atomic", "torch_route", "vllm_route", "folded")]
        lines.append(f"| {r['shape']} | {r['M']} | {r['scoring']} | {' | '.join(cells)} | {r['fold_gain']} | "
                     f"{r['prologue_us']} |")  # fmt: skip
    lines += [
        "",
        "| shape | M | router GEMM | router + vLLM top-k + kernels µs | router + folded µs | router + folded, GEMM1"
        " PDL µs | vLLM top-k + kernels, GEMM1 PDL µs | PDL gain | PDL alone gain | block gain |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        cells = [_cell(r, c) for c in ("router_vllm", "router_folded", "router_folded_pdl", "vllm_route_pdl")]
        gains = [str(r.get(g, "")) for g in GAINS]
        lines.append(f"| {r['shape']} | {r['M']} | {r.get('router_gemm', '')} | {' | '.join(cells + gains)} |")
    return "\n".join(lines) + "\n"


PLOTTED = (
    ("kernels", "kernels alone"), ("vllm_route", "vLLM top-k + kernels"), ("torch_route", "torch top-k + kernels"),
    ("folded", "folded"), ("kernels_atomic", "kernels, atomic sum"), ("router_vllm", "router + vLLM top-k + kernels"),
    ("router_folded", "router + folded"), ("router_folded_pdl", "router + folded, GEMM1 PDL"),
)  # fmt: skip


def plot(rows: list[dict], path: Path) -> None:
    """µs per MoE layer call against M, one panel per shape, error bars = the spread of the reps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(str(r["shape"]) for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.6), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        rs = [r for r in rows if r["shape"] == shape]
        for name, label in PLOTTED:
            pts = [(int(r["M"]), float(r[f"{name}_us"]), float(r[f"{name}_spread"])) for r in rs if r.get(f"{name}_us")]
            if pts:
                m, us, spread = zip(*pts, strict=True)
                ax.errorbar(m, us, yerr=[u * s / 2 for u, s in zip(us, spread, strict=True)], marker="o", label=label,
                            capsize=2)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_title(f"{shape} ({rs[0]['scoring']})", fontsize=9)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("µs per MoE layer call")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--ms", default=",".join(map(str, BENCH_M)))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=KERNEL_RESULTS)
    ap.add_argument("--plot", type=Path, metavar="CSV", help="only plot CSV (from a GPU run) beside it as .png")
    args = ap.parse_args(argv)
    if args.plot:
        with open(args.plot, newline="") as f:
            plot([{k: v for k, v in r.items() if v != ""} for r in csv.DictReader(f)], args.plot.with_suffix(".png"))
        return 0
    if not torch.cuda.is_available():
        print("bench_moe_fold needs an NVIDIA GPU", file=sys.stderr)
        return 2
    meta = {**run_preamble(), "hbm_read_gbs": round(hbm_read_gbs(), 1)}
    topk_fn = vllm_topk()
    router_gemm = vllm_router_gemm()
    rows: list[dict] = []
    args.out.mkdir(parents=True, exist_ok=True)
    from kernels.shapes import shape_by_key

    for key in args.shapes.split(","):
        try:
            ms = tuple(int(m) for m in args.ms.split(","))
            rows += bench_shape(shape_by_key(key), ms, args.reps, topk_fn, router_gemm=router_gemm)
        except Exception as exc:  # one shape failing must not lose the others
            print(f"[{key}] failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        with open(args.out / "h200_moe_fold.csv", "w", newline="") as f:  # after every shape: a cut run keeps rows
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({**meta, **r} for r in rows)
        (args.out / "h200_moe_fold.md").write_text(markdown(rows))
    try:
        plot(rows, args.out / "h200_moe_fold.png")
    except Exception as exc:  # matplotlib may be missing on the GPU host: --plot CSV makes it later
        print(f"plot skipped: {exc}", file=sys.stderr)
    print(markdown(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
