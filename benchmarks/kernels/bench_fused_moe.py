"""Our fused MoE vs vLLM's tuned Triton kernel vs CUTLASS grouped GEMM vs the HBM floor (H200).

Per shape and M = 1..256, one CSV row (benchmarks/results/kernels/h200_fused_moe.csv):
  ours_us      fused_moe_fp8 with its default heuristic config,
  ours_best_us best of a few alternative configs at M ≤ 4 (what tuning could add; config in best_cfg),
  ours_pdl_us  the default config with programmatic dependent launch + W2 prefetch forced on,
  ours_nopdl_us the default config with it forced off (default_config picks one of the two, PDL_MAX_W2_BYTES;
               that one repeats ours_us),
  ours_bm16_us SCAN mode only, where the default block_m is wider: the default config with block_m 16
               (the 2026-11-30 kernel's row blocks: what the wider blocks add),
  vllm_us      vLLM's fused_experts with this project's tuned configs (VLLM_TUNED_CONFIG_FOLDER=kernels/configs
               when it holds files), empty when vLLM is not importable,
  ours_shared_us, vllm_shared_us  the same two at 1 < M ≤ SHARED_MAX_M with every token of a routing on the same
               experts (a served batch's tokens can share experts: vLLM's kernel reads each touched expert once,
               ours once per token),
  ours_hot_us, vllm_hot_us  the same two at 1 < M ≤ SHARED_MAX_M with the hot routing of
               kernels/tuning/routing_weights.py
               (half of the mass on a few experts, as trained routers are uneven); benchmarks.kernels.dispatch_table
               takes the worse of uniform and hot where these columns exist, else of uniform and shared,
  ours_pair_us, ours_scan_us, ours_pair_shared_us, ours_scan_shared_us  at 1 < M ≤ SHARED_MAX_M: the default
               config sized for each side of the PAIR/SCAN switch, both routings (the data for a per-shape
               crossover; the default's own mode repeats ours_us / ours_shared_us),
  baseline_us  torch._scaled_grouped_mm (CUTLASS) doing the same expert work (routing sort excluded),
  roofline_us  distinct experts' FP8 weight bytes ÷ HBM read bandwidth measured in this run.
All timed the same way (tools/measure.py graph_us): R calls on R different uniform routings captured in
one CUDA graph, so weights come from HBM (R·touched bytes ≥ 3× L2) and launch gaps are graph-short.
Same weights for all three (vLLM's problem object). Llama-4 applies the router weight on the input in
vLLM and on the output here: same bytes and FLOPs.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.paths import KERNEL_RESULTS
from kernels.config_files import CONFIG_DIR
from kernels.tuning import moe_harness
from tools.measure import graph_us, hbm_read_gbs, run_preamble

SHAPES = (
    "qwen3-30b-a3b:tp1",
    "deepseek-v3:tp8",
    "llama-4-maverick:tp8",
    "mixtral-8x7b:tp1",
    "nemotron-3-nano-30b-a3b:tp1",
)
BENCH_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SHARED_MAX_M = 16  # the shared-routing columns: where our kernel can win at all (it loses from M ≈ 16 uniformly)
COLUMNS = (
    "shape", "M", "ours_us", "ours_best_us", "ours_pdl_us", "ours_nopdl_us", "ours_bm16_us", "vllm_us",
    "ours_shared_us", "vllm_shared_us", "ours_hot_us", "vllm_hot_us", "ours_pair_us", "ours_scan_us",
    "ours_pair_shared_us", "ours_scan_shared_us",
    "baseline_us",
    "roofline_us", "speedup_vs_vllm",
    "pct_floor_ours", "pct_floor_vllm", "mode", "best_cfg", "rel_err_vs_vllm", "distinct_experts", "hbm_read_gbs",
    "gpu", "torch", "triton", "vllm", "timestamp",
)  # fmt: skip


def setup_vllm() -> Any | None:
    """Point vLLM at our tuned configs (before import) and import it; None when it is not installed."""
    if any(CONFIG_DIR.glob("*.json")):
        os.environ.setdefault("VLLM_TUNED_CONFIG_FOLDER", str(CONFIG_DIR))
    try:
        import vllm

        moe_harness.vllm_fused_moe()
        return vllm
    except Exception as exc:  # any import failure means "no vLLM here"
        print(f"vLLM not importable ({type(exc).__name__}: {exc}); benchmarking ours vs CUTLASS vs floor only")
        return None


def sweep_configs(m: int, s: Any) -> list[Any]:
    """The alternatives to the heuristic that ``candidate_configs`` lists for this (shape, M), default excluded."""
    from ops.fused_moe_fp8 import candidate_configs

    block_k = s.block_shape[1] if s.block_shape else 128
    return candidate_configs(m, s.e, s.topk, s.h, s.n, block_k=block_k)[1:]


def bench_shape(key: str, ms: tuple[int, ...], bw: float, have_vllm: bool, sweep_max_m: int) -> list[dict]:
    from benchmarks.kernels.bench_moe_configs import GroupedMMBaseline
    from kernel_checks.reference import rel_err
    from kernels.shapes import shape_by_key
    from ops.fused_moe_fp8 import default_config, fused_moe_fp8

    s = shape_by_key(key)
    problem = moe_harness.MoEProblem(s) if have_vllm else moe_harness.PlainMoEProblem(s)
    scales = problem.scales
    act = "silu" if s.model.gated else "relu2"
    block_k = s.block_shape[1] if s.block_shape else 128
    rows = []
    for m in ms:
        batch = problem.inputs(m, moe_harness.rotations(s, m))

        def ours(cfg=None, batch=batch):
            def run():
                for x, w, ids in batch:
                    fused_moe_fp8(x, problem.w1, problem.w2, w, ids, **scales, activation=act, config=cfg)

            return graph_us(run, calls=len(batch))

        row: dict[str, Any] = {"shape": key, "M": m}
        try:
            row["ours_us"] = ours()
        except Exception as exc:  # record and continue with the other columns
            print(f"[{key} M={m}] ours failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            row["ours_us"] = float("nan")
        best, best_cfg = row["ours_us"], "default"
        if m <= sweep_max_m:
            for cfg in sweep_configs(m, s):
                try:
                    us = ours(cfg)
                except Exception as exc:
                    print(f"[{key} M={m}] {cfg} failed: {exc}", file=sys.stderr)
                    continue
                if us < best:
                    best, best_cfg = us, f"split{cfg.split_k}/n1={cfg.block_n1}/n2={cfg.block_n2}"
        row["ours_best_us"], row["best_cfg"] = best, best_cfg
        base = default_config(m, s.e, s.topk, s.h, s.n, block_k=block_k)
        row["mode"] = "pair" if base.pair_mode else f"scan/m={base.block_m}"
        for col, changes, wanted in (
            ("ours_pdl_us", {"pdl": True}, True),
            ("ours_nopdl_us", {"pdl": False}, True),
            ("ours_bm16_us", {"block_m": 16}, base.block_m != 16),
        ):
            variant = dataclasses.replace(base, **changes)
            if wanted and variant == base:  # the default config itself: timed above already
                row[col] = row["ours_us"]
            elif wanted:
                try:
                    row[col] = ours(variant)
                except Exception as exc:
                    print(f"[{key} M={m}] {col} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        if have_vllm:
            try:
                row["vllm_us"] = moe_harness.GraphTimer(problem, m).measure(None)
                x, w, ids = batch[0]
                ref = problem.run(x, w, ids).float()
                mine = fused_moe_fp8(x, problem.w1, problem.w2, w, ids, **scales, activation=act).float()
                row["rel_err_vs_vllm"] = rel_err(mine, ref)
            except Exception as exc:
                print(f"[{key} M={m}] vLLM failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        if 1 < m <= SHARED_MAX_M:
            shared = problem.inputs(m, moe_harness.rotations(s, m, "shared"), routing="shared")
            for routing, routed in (("shared", shared), ("hot", None)):
                try:
                    routed = routed or problem.inputs(m, moe_harness.rotations(s, m, routing), routing=routing)
                    row[f"ours_{routing}_us"] = ours(batch=routed)
                    if have_vllm:
                        row[f"vllm_{routing}_us"] = moe_harness.GraphTimer(problem, m, routing).measure(None)
                except Exception as exc:
                    print(f"[{key} M={m}] {routing} routing failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            for mode, pair in (("pair", True), ("scan", False)):
                forced = default_config(m, s.e, s.topk, s.h, s.n, block_k=block_k, pair_mode=pair)
                for suffix, routing in (("", batch), ("_shared", shared)):
                    column = f"ours_{mode}{suffix}_us"
                    if forced == base:  # the default's own mode: timed above
                        row[column] = row.get("ours_shared_us" if suffix else "ours_us")
                        continue
                    try:
                        row[column] = ours(forced, batch=routing)
                    except Exception as exc:
                        print(f"[{key} M={m}] {column} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        try:
            row["baseline_us"] = GroupedMMBaseline(problem, batch).measure()
        except Exception as exc:
            print(f"[{key} M={m}] scaled_grouped_mm failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        row["distinct_experts"] = round(moe_harness.distinct_experts(batch), 2)
        row["roofline_us"] = moe_harness.hbm_floor_us(s, batch, bw)
        for col in ("ours", "vllm"):
            if row.get(f"{col}_us"):
                row[f"pct_floor_{col}"] = round(100 * row["roofline_us"] / row[f"{col}_us"], 1)
        if row.get("vllm_us") and row.get("ours_us"):
            row["speedup_vs_vllm"] = round(row["vllm_us"] / row["ours_us"], 3)
        print(
            f"{key:28s} M={m:4d} ours={row['ours_us']:8.2f} best={best:8.2f}"
            f" pdl={row.get('ours_pdl_us', float('nan')):8.2f} nopdl={row.get('ours_nopdl_us', float('nan')):8.2f}"
            f" bm16={row.get('ours_bm16_us', float('nan')):8.2f}"
            f" vllm={row.get('vllm_us', float('nan')):8.2f}"
            f" cutlass={row.get('baseline_us', float('nan')):8.2f} floor={row['roofline_us']:7.2f} us",
            flush=True,
        )
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| shape | M | ours µs | with PDL µs | vLLM tuned µs | CUTLASS µs | floor µs | ours / vLLM | ours % floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def f(r: dict, k: str) -> str:
        v = r.get(k)
        return f"{v:.1f}" if isinstance(v, float) else ("" if v is None else str(v))

    for r in rows:
        lines.append(
            f"| {r['shape']} | {r['M']} | {f(r, 'ours_us')} | {f(r, 'ours_pdl_us')} | {f(r, 'vllm_us')} "
            f"| {f(r, 'baseline_us')} "
            f"| {f(r, 'roofline_us')} "
            f"| {r.get('speedup_vs_vllm', '')} | {r.get('pct_floor_ours', '')} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted({r["shape"] for r in rows})
    fig, axes = plt.subplots(1, len(shapes), figsize=(4 * len(shapes), 3.5), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        rs = [r for r in rows if r["shape"] == shape]
        for col, label in (("ours_us", "ours"), ("vllm_us", "vLLM tuned"), ("baseline_us", "CUTLASS grouped")):
            pts = [(r["M"], 100 * r["roofline_us"] / r[col]) for r in rs if r.get(col)]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(shape, fontsize=9)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("% of HBM floor")
        ax.set_ylim(0, 110)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_outputs(rows: list[dict], meta: dict, out: Path) -> None:
    with open(out / "h200_fused_moe.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({**meta, **r})
    (out / "h200_fused_moe.md").write_text(markdown(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--ms", default=",".join(map(str, BENCH_M)))
    ap.add_argument("--sweep-max-m", type=int, default=1, help="try alternative configs up to this M (0: none)")
    ap.add_argument("--out", type=Path, default=KERNEL_RESULTS)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_fused_moe needs an NVIDIA GPU", file=sys.stderr)
        return 2
    vllm = setup_vllm()
    bw = hbm_read_gbs()
    print(f"HBM read bandwidth {bw:.0f} GB/s", flush=True)
    meta = {**run_preamble(), "hbm_read_gbs": round(bw, 1)}
    rows: list[dict] = []
    args.out.mkdir(parents=True, exist_ok=True)
    for key in args.shapes.split(","):
        try:
            rows += bench_shape(key, tuple(int(m) for m in args.ms.split(",")), bw, vllm is not None, args.sweep_max_m)
        except Exception as exc:  # one shape failing must not lose the others
            print(f"[{key}] failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        write_outputs(rows, meta, args.out)  # after every shape: a timeout keeps what was measured
    try:
        plot(rows, args.out / "h200_fused_moe.png")
    except Exception as exc:  # matplotlib may be missing on the GPU host
        print(f"plot skipped: {exc}", file=sys.stderr)
    print(markdown(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
