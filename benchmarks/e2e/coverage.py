"""Which served rows issue 31 asks for have been measured, and where: a table per model of engine × workload.

Issue 31 (item 3) wants plan, LMI-equivalent and auto, at concurrency 1-128 and with 4096-token prompts, for each
model, on an H200 with the image's engine and realistic routing. The rows are spread over a dozen dated folders;
this reads every e2e CSV under the results tree and names, per cell, the newest run that has a publishable row
(status ok, floor check passed, uniform routing): an H200 run, else an H100 one in brackets (ratios only), else
"–". The queue's steps (benchmarks/device/queues/h200.txt) are meant to fill the dashes.

    python -m benchmarks.e2e.coverage [--results benchmarks/results] [--vllm 0.32.0] [--out coverage.md]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The engines a ratio in the docs compares (docs/results/README.md, "How to read these pages"), by their CSV label.
ENGINES = {"plan": "plan", "triton": "LMI-equivalent", "auto": "auto"}
# The issue's two uniform strategies: vLLM's and our one-kernel draw of the same distribution. hot_experts is a
# sensitivity check and dummy a control; neither fills a cell.
UNIFORM_ROUTINGS = frozenset({"uniform_random", "uniform_one_launch"})
CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128)
SHORT_INPUT = 512
LONG_INPUT = 4096
# The models and workloads item 3 lists: concurrency 1-128 with 512-token prompts, plus "the 4096-token row" (one
# request). Other models (tuned on the GPU, docs/results/tune-on-the-gpu.md) and 4096 × 8 are shown, not counted.
ISSUE_MODELS = ("qwen3-30b-a3b-fp8-static", "mixtral-8x7b-fp8-static", "nemotron-3-nano-30b-a3b-fp8")
REQUIRED = (*((SHORT_INPUT, c) for c in CONCURRENCIES), (LONG_INPUT, 1))
_RUN_NAME = re.compile(r"20\d\d-\d\d-\d\d[a-z]?")


@dataclass(frozen=True)
class Measured:
    model: str
    engine: str  # a key of ENGINES
    input_len: int
    conc: int
    gpu: str  # "H200" or "H100"
    run: str  # the run's name, e.g. 2026-12-07c


def run_name(path: Path, timestamp: str) -> str:
    """The run a CSV belongs to, from its folder or file name (routing_2026-12-07c/…, h200_e2e_2026-12-01d.csv);
    the row's date where neither names one."""
    for part in (path.parent.name, path.stem):
        found = _RUN_NAME.search(part)
        if found:
            return found.group(0)
    return timestamp[:10]


def gpu_kind(gpu: str) -> str | None:
    return next((kind for kind in ("H200", "H100") if kind in gpu), None)


def publishable(row: dict[str, str], vllm: str) -> bool:
    return (
        row.get("status") == "ok"
        and row.get("floor_check") == "pass"
        and row.get("routing") in UNIFORM_ROUTINGS
        and row.get("vllm") == vllm
        and row.get("backend") in ENGINES
        and row.get("split", "tp1") == "tp1"
    )


def measured_rows(paths: Iterable[Path], vllm: str) -> Iterator[Measured]:
    for path in paths:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or not {"backend", "conc", "floor_check"} <= set(reader.fieldnames):
                continue
            for row in reader:
                kind = gpu_kind(row.get("gpu", ""))
                if kind is None or not publishable(row, vllm):
                    continue
                yield Measured(
                    model=row["model"],
                    engine=row["backend"],
                    input_len=int(row["input_len"]),
                    conc=int(row["conc"]),
                    gpu=kind,
                    run=run_name(path, row.get("timestamp", "")),
                )


def cell(found: list[Measured]) -> str:
    """The newest H200 run for a cell, else the newest H100 run in brackets, else a dash."""
    for kind, form in (("H200", "{}"), ("H100", "({} H100)")):
        runs = sorted({m.run for m in found if m.gpu == kind})
        if runs:
            return form.format(runs[-1][len("YYYY-") :])  # month-day and letter: the cells stay narrow
    return "–"


def columns(rows: list[Measured]) -> list[tuple[int, int]]:
    long_concs = sorted({m.conc for m in rows if m.input_len == LONG_INPUT}) or [1]
    return [(SHORT_INPUT, c) for c in CONCURRENCIES] + [(LONG_INPUT, c) for c in long_concs]


def coverage_table(rows: list[Measured]) -> str:
    cols = columns(rows)
    head = [f"{c}" if n == SHORT_INPUT else f"{c} × {n} in" for n, c in cols]
    lines: list[str] = []
    for model in sorted({m.model for m in rows}):
        lines += [f"### {model}", "", "| engine | " + " | ".join(head) + " |", "|---" * (len(cols) + 1) + "|"]
        for engine, name in ENGINES.items():
            cells = [
                cell([m for m in rows if (m.model, m.engine, m.input_len, m.conc) == (model, engine, n, c)])
                for n, c in cols
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def missing_on_h200(rows: list[Measured], models: Iterable[str] = ISSUE_MODELS) -> list[str]:
    """Every cell item 3 asks for (REQUIRED) with no H200 row, as "model engine conc×input"."""
    have = {(m.model, m.engine, m.input_len, m.conc) for m in rows if m.gpu == "H200"}
    return [
        f"{model} {ENGINES[engine]} {c}x{n}"
        for model in models
        for engine in ENGINES
        for n, c in REQUIRED
        if (model, engine, n, c) not in have
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--vllm", default="0.32.0", help="the engine version whose rows count (the image's)")
    parser.add_argument("--out", type=Path, help="write the markdown here as well as to stdout")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"coverage: --results {args.results} is not a directory", file=sys.stderr)
        return 2
    rows = list(measured_rows(sorted(args.results.rglob("*.csv")), args.vllm))
    gaps = missing_on_h200(rows)
    required = len(ISSUE_MODELS) * len(ENGINES) * len(REQUIRED)
    text = (
        f"# Served rows measured on vLLM {args.vllm} with uniform routing\n\n"
        "Each cell names the newest run with a publishable row (status ok, floor check passed); in brackets an H100"
        " run\n(ratios only) where no H200 has run it; – where none has. Made by `python -m benchmarks.e2e.coverage"
        f" --out ...`.\n\n{coverage_table(rows)}\n"
        f"Issue 31's models: {required - len(gaps)} of the {required} cells it asks for (1-128 requests, and one of"
        " 4096 tokens) have an H200 row. Without one:\n\n" + "".join(f"- {gap}\n" for gap in gaps)
    )
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
