"""Command line: ``python -m benchmarks.e2e [run] --models ... --backends ... --conc 1,8,64``.

Subcommands: ``run`` (default) measures; ``estimate`` prints the jobs and the expected time and exits;
``report --csv FILE [--merge RUN.csv ...]`` redraws the markdown table and the PNG from a CSV (e.g. one fetched
from the H200), first combining a session's runs into it with ``--merge``;
``plans`` writes the resolver's decisions for the bundled models to a snapshot, for GPU hosts where the
resolver's own dependencies are not installed; ``prepare --work-dir DIR`` makes what every run of DIR shares
(FlashInfer's JIT modules, vLLM's model-info entries) before any run's budget starts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.e2e import backends as be
from benchmarks.e2e import floor_plot, report, runner, spec
from benchmarks.e2e.run import execute, prepare_shared
from benchmarks.e2e.run_args import DEFAULT_SNAPSHOT, parse_run_args
from benchmarks.sigterm import exit_on_sigterm
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION


def report_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e report")
    p.add_argument("--csv", type=Path, required=True, help="the table to redraw (written when --merge is given)")
    p.add_argument("--merge", type=Path, nargs="+", default=None, metavar="RUN_CSV",
                   help="runs of one session (e.g. one phase per GPU) to combine into --csv first; a measured row "
                        "replaces a skipped one of the same model, backend and workload")  # fmt: skip
    p.add_argument("--out-dir", type=Path, default=None, help="default: the CSV's folder")
    ns = p.parse_args(argv)
    if ns.merge:
        try:
            rows = report.merge_runs([report.read_csv(path) for path in ns.merge])
        except (OSError, ValueError) as exc:
            p.error(f"--merge: {exc}")
    else:
        rows = report.read_csv(ns.csv)
    report.add_ratios(rows)
    if ns.merge:
        report.write_csv(rows, ns.csv)
    out = ns.out_dir or ns.csv.parent
    out.mkdir(parents=True, exist_ok=True)
    stem = ns.csv.stem
    table = report.markdown_table(rows)
    (out / f"{stem}.md").write_text(table)
    drew = floor_plot.plot_run(rows, out / f"{stem}.png")
    print(table)
    print(
        f"wrote {out / (stem + '.md')}"
        + (f" and {out / (stem + '.png')}" if drew else " (no PNG: no matplotlib, or nothing to draw)")
    )
    return 0


def plans_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e plans")
    p.add_argument("--gpu", default="H200")
    p.add_argument("--out", type=Path, default=DEFAULT_SNAPSHOT)
    p.add_argument("--vllm-version", default=PINNED_VLLM_VERSION, help=f"default: the image's ({PINNED_VLLM_VERSION})")
    ns = p.parse_args(argv)
    plans = {}
    for name in spec.BUNDLED_MODELS:
        d = be.plan_from_resolver(spec.resolve_model_dir(name), ns.gpu, ns.vllm_version)
        # the repository's folders relative to its root: the snapshot is read on other machines (backends._plan_setup
        # puts this checkout's tile folder where the named one is missing)
        env = {k: v.removeprefix(f"{be.REPO_ROOT}/") for k, v in d.env.items()}
        plans[name] = {"moe_backend": d.moe_backend, "env": env}
    snapshot = {"gpu": ns.gpu, "vllm": ns.vllm_version, "plans": plans}
    ns.out.write_text(json.dumps(snapshot, indent=2) + "\n")
    print(ns.out.read_text())
    return 0


def prepare_main(argv: Sequence[str]) -> int:
    about = ("Make what every run of a work dir shares, once, before any run's budget starts: FlashInfer's JIT "
             "modules and vLLM's model-info entries.")  # fmt: skip
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e prepare", description=about)
    p.add_argument("--work-dir", type=Path, required=True)
    p.add_argument("--timeout-s", type=float, default=420.0, help="for both (default 420)")
    ns = p.parse_args(argv)
    ns.work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    prepared = prepare_shared(ns.work_dir, runner.Budget(ns.timeout_s), served=True)
    baked = prepared.model_info_env
    if prepared.flashinfer_s is None and not baked:  # the queue's status shows it; each engine then builds both
        print(f"e2e prepare: nothing made for {ns.work_dir} (FlashInfer's JIT and the model info both failed)")
        return 1
    print(f"e2e prepare: {ns.work_dir} ready in {time.monotonic() - t0:.0f} s" + ("" if baked else " (no model info)"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    exit_on_sigterm()  # unwinding lets run_job stop the engine's process group (its own session)
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and not argv[0].startswith("-") else "run"
    if command == "run":
        return execute(parse_run_args(argv))
    if command == "estimate":
        return execute(parse_run_args([*argv, "--dry-run"]))
    if command == "report":
        return report_main(argv)
    if command == "plans":
        return plans_main(argv)
    if command == "prepare":
        return prepare_main(argv)
    print(f"unknown command {command!r}; accepted: run, estimate, report, plans, prepare", file=sys.stderr)
    return 2
