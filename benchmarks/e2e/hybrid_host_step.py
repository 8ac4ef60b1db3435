"""The host's work in one decode step of a Mamba hybrid, phase by phase, on the CPU vLLM (issue 31, Nemotron).

    python -m benchmarks.e2e.hybrid_host_step [--tokens 64] [--reps 3] [--conc 1,4] [--out-dir DIR]

An H100 profile (2026-12-05e) found Nemotron-3-Nano's one-request step host-bound: the GPU waited 2.8 ms for the host
before each CUDA graph. Most of the host's part is the same Python on every platform: vLLM's scheduler, and the GPU
model runner, which the CPU build's runner subclasses. The CPU build differs in its attention group's metadata builder
(Mamba groups keep theirs), in turning async scheduling off, and in its block size. So the phases can be timed here,
on this machine's CPU vLLM:

- `Nemotron, prefix caching off`: Nemotron-3-Nano's 52-layer pattern (23 Mamba, 6 attention, 23 MoE layers) at
  tiny widths; vLLM runs Mamba's `none` cache mode;
- `Nemotron, prefix caching on`: the same in `align` mode, as the image's serving.properties (prefix caching on) runs
  it (vLLM forces `align` on a hybrid with prefix caching, model_executor/models/config.py);
- `Qwen3-30B-A3B, prefix caching on`: its 48 attention + MoE layers at the same tiny widths, no Mamba: the
  non-hybrid reference, as the image runs it.

Nemotron's MoE layers become dense MLP layers: vLLM's CPU build has no non-gated (relu²) fused MoE
("is_act_and_mul=False is supported only for CUDA, XPU and ROCm", fused_moe/config.py); on a GPU the MoE runs inside
the CUDA graph, so it is not host work anyway. Each phase is timed by wrapping vLLM's own method (perf_counter), and
the figure is the median over a run's steps; the spread is across `--reps` runs. `_model_forward` is this CPU
computing the tiny model: it is reported but is no GPU figure. µs are this machine's; what carries to a GPU host is
which phases grow and by how much between conditions. Writes cpu_hybrid_host_step.csv/.md/.png under --out-dir.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.e2e.stats import spread_pct
from benchmarks.paths import E2E_RESULTS

MODELS = Path(__file__).resolve().parent / "models"
NEMOTRON_CONFIG = MODELS / "nemotron-3-nano-30b-a3b-fp8" / "config.json"
QWEN3_CONFIG = MODELS / "qwen3-30b-a3b-fp8-static" / "config.json"
# the widths every tiny model here gets (the tiny MoE model's tokenizer has 512 ids)
TINY_WIDTHS = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
               "vocab_size": 512, "max_position_embeddings": 512, "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip
STEM = "cpu_hybrid_host_step"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
FORWARD = "_model_forward"
# (owner module, class or "", attribute): the phases of one engine step (preprocess_mamba runs inside execute_model,
# just before _build_attention_metadata; the tables list it after)
PHASES: tuple[tuple[str, str, str], ...] = (
    ("vllm.v1.core.sched.scheduler", "Scheduler", "schedule"),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "_update_states"),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "_prepare_inputs"),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "_build_attention_metadata"),
    ("vllm.v1.worker.mamba_utils", "", "preprocess_mamba"),  # align mode only; called through the module
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "_preprocess"),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", FORWARD),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "execute_model"),
    ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "sample_tokens"),
    ("vllm.v1.core.sched.scheduler", "Scheduler", "update_from_output"),
)
EXECUTE = "execute_model"
# execute_model calls the runner's phases above it (gpu_model_runner.py), none inside another
EXECUTE_PARTS = ("_update_states", "_prepare_inputs", "_build_attention_metadata", "preprocess_mamba", "_preprocess",
                 FORWARD)  # fmt: skip
EXECUTE_REST = "execute_model's untimed rest"
# the host's work outside the forward: a step's top-level phases, minus the forward
HOST_TOTAL_PARTS = ("schedule", EXECUTE, "sample_tokens", "update_from_output")
HOST_OUTSIDE_FORWARD = "host outside the forward"
ROW_ORDER = (*(p for _, _, p in PHASES), EXECUTE_REST, HOST_OUTSIDE_FORWARD)


@dataclass(frozen=True)
class Condition:
    name: str
    hybrid: bool  # Nemotron's layer pattern, else Qwen3-30B-A3B's
    prefix_caching: bool


CONDITIONS = (
    Condition("Nemotron, prefix caching off", True, False),
    Condition("Nemotron, prefix caching on", True, True),
    Condition("Qwen3-30B-A3B, prefix caching on", False, True),
)


def tiny_hybrid_config(real: dict[str, Any]) -> dict[str, Any]:
    """Nemotron's config with its layer pattern kept, MoE layers as dense MLP ones, and tiny widths (module doc)."""
    pattern = real["hybrid_override_pattern"].replace("E", "-")  # no CPU kernel for relu² MoE
    config = {k: v for k, v in real.items() if k != "auto_map"}  # vLLM's own NemotronH classes, no remote code
    config.update(TINY_WIDTHS, hybrid_override_pattern=pattern, num_hidden_layers=len(pattern), intermediate_size=128,
                  mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=16, pad_token_id=0)  # fmt: skip
    return config


def tiny_moe_config(real: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-30B-A3B's config with its 48 layers, tiny widths and 16 experts, top-4, in bf16 (no FP8 on the CPU)."""
    config = {k: v for k, v in real.items() if k != "quantization_config"}
    config.update(TINY_WIDTHS, intermediate_size=128, moe_intermediate_size=128, num_experts=16, num_experts_per_tok=4)
    return config


def tiny_config(condition: Condition) -> dict[str, Any]:
    if condition.hybrid:
        return tiny_hybrid_config(json.loads(NEMOTRON_CONFIG.read_text()))
    return tiny_moe_config(json.loads(QWEN3_CONFIG.read_text()))


def write_model(dest: Path, config: dict[str, Any], tokenizer_dir: Path) -> Path:
    """A model folder vLLM loads with dummy weights: the config and the tiny MoE model's byte-level tokenizer."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    for name in TOKENIZER_FILES:
        shutil.copy2(tokenizer_dir / name, dest / name)
    return dest


def install_timers(owners: dict[str, Any], times: dict[str, list[float]]) -> None:
    """Wrap each phase so that every call appends its seconds to times[phase]."""
    for module_name, class_name, attr in PHASES:
        owner = getattr(owners[module_name], class_name) if class_name else owners[module_name]
        original: Callable[..., Any] = getattr(owner, attr)

        def timed(*args: Any, _original: Callable[..., Any] = original, _key: str = attr, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                times.setdefault(_key, []).append(time.perf_counter() - start)

        setattr(owner, attr, functools.wraps(original)(timed))


Runs = dict[int, list[dict[str, float]]]  # concurrency → one {phase: median µs per call} per run


def derive(medians: dict[str, float]) -> dict[str, float]:
    """The run's phase medians with the two derived rows: execute_model's time outside its timed phases, and the
    host's work outside the forward (the step's top-level phases minus the forward). The latter still holds this CPU
    computing the logits and sampling, and leaves out the engine core's work between the phases."""
    derived = dict(medians)
    derived[EXECUTE_REST] = medians[EXECUTE] - sum(medians.get(p, 0.0) for p in EXECUTE_PARTS)
    derived[HOST_OUTSIDE_FORWARD] = sum(medians.get(p, 0.0) for p in HOST_TOTAL_PARTS) - medians[FORWARD]
    return derived


def run_condition(model_dir: Path, prefix_caching: bool, conc: Sequence[int], tokens: int, reps: int) -> Runs:
    """In this process: one engine, then `reps` runs per concurrency."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process, timers included
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import importlib

    times: dict[str, list[float]] = {}
    install_timers({m: importlib.import_module(m) for m, _, _ in PHASES}, times)
    from vllm import LLM, SamplingParams

    llm = LLM(str(model_dir), load_format="dummy", max_model_len=512, max_num_seqs=max(conc),
              enable_prefix_caching=prefix_caching, dtype="bfloat16")  # fmt: skip
    params = SamplingParams(max_tokens=tokens, ignore_eos=True, temperature=0)
    llm.generate(["warm up"] * max(conc), params, use_tqdm=False)
    runs: Runs = {}
    for c in conc:
        for rep in range(reps):
            times.clear()
            llm.generate([f"request {i} of run {rep}" for i in range(c)], params, use_tqdm=False)
            runs.setdefault(c, []).append(derive({k: statistics.median(v) * 1e6 for k, v in times.items()}))
    return runs


def summarise(condition: str, runs: Runs, vllm_version: str) -> list[dict[str, Any]]:
    """One row per (concurrency, phase): the median of the runs' medians and their spread."""
    rows = []
    for c, reps in runs.items():
        for phase in (p for p in ROW_ORDER if any(p in r for r in reps)):
            values = [r.get(phase, 0.0) for r in reps]
            rows.append({"vllm": vllm_version, "condition": condition, "conc": c, "phase": phase,
                         "us_median": round(statistics.median(values), 1), "spread_pct": round(spread_pct(values), 1),
                         "reps": len(values)})  # fmt: skip
    return rows


def _condition_in_subprocess(condition: Condition, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """A fresh process per condition: vLLM's engine and its timers start clean, and a crash names its condition."""
    from entrypoint.model.tiny_model import ensure_tiny_model
    from entrypoint.run_local import tiny_model_dir

    tokenizer_dir = ensure_tiny_model(tiny_model_dir(dict(os.environ)))
    folder = work / condition.name.replace(" ", "-").replace(",", "")
    model = write_model(folder, tiny_config(condition), tokenizer_dir)
    request = {"model": str(model), "prefix_caching": condition.prefix_caching, "conc": args.conc,
               "tokens": args.tokens, "reps": args.reps}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "benchmarks.e2e.hybrid_host_step", "--worker", json.dumps(request)],
                          capture_output=True, text=True, timeout=args.timeout_s)  # fmt: skip
    result = next((line for line in proc.stdout.splitlines() if line.startswith("RESULT ")), None)
    if proc.returncode != 0 or result is None:
        raise RuntimeError(f"{condition.name}: the engine run failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(result.removeprefix("RESULT "))
    runs = {int(c): reps for c, reps in data["runs"].items()}
    return summarise(condition.name, runs, data["vllm"])


def write_report(rows: list[dict[str, Any]], out_dir: Path, command: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"{STEM}.csv", out_dir / f"{STEM}.md"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    md_path.write_text(markdown(rows, command))
    written = [csv_path, md_path]
    png = plot(rows, out_dir / f"{STEM}.png")
    return written + ([png] if png else [])


def _by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(condition, concurrency, phase) → its row."""
    return {(r["condition"], r["conc"], r["phase"]): r for r in rows}


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    """The phases as rows, the conditions as columns, per concurrency: median µs (spread %)."""
    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    by_key = _by_key(rows)
    lines = [f"# The host's work per decode step, phase by phase (CPU vLLM {rows[0]['vllm']})", "",
             f"Command: `{command}`. Medians of each run's per-step medians, µs on this machine (spread over "
             f"{rows[0]['reps']} runs); `{FORWARD}` is this CPU computing the tiny model, no GPU figure.",
             ""]  # fmt: skip
    for c in dict.fromkeys(r["conc"] for r in rows):
        lines += [f"## {c} request{'s' if c > 1 else ''}", "", "| phase | " + " | ".join(conditions) + " |",
                  "|---" * (len(conditions) + 1) + "|"]  # fmt: skip
        present = {r["phase"] for r in rows if r["conc"] == c}
        for phase in (p for p in ROW_ORDER if p in present):
            cells = []
            for name in conditions:
                row = by_key.get((name, c, phase))
                cells.append(f"{row['us_median']:,.1f} ({row['spread_pct']:.1f} %)" if row else "–")
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Stacked host phases (no forward, no totals) per condition and concurrency."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    host_phases = [p for _, _, p in PHASES if p not in (FORWARD, EXECUTE)] + [EXECUTE_REST]
    bars = list(dict.fromkeys((r["condition"], r["conc"]) for r in rows))
    by_key = _by_key(rows)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    bottoms = [0.0] * len(bars)
    for phase in host_phases:
        heights = [by_key[(*bar, phase)]["us_median"] if (*bar, phase) in by_key else 0.0 for bar in bars]
        ax.barh(range(len(bars)), heights, left=bottoms, label=phase.lstrip("_"))  # "_x" labels: no legend entry
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_yticks(range(len(bars)), [f"{name}, {c} req." for name, c in bars], fontsize=8)
    ax.set_xlabel("µs per decode step on this machine's CPU (the host's phases; the forward not drawn)")
    ax.set_title(f"The host's work per decode step, CPU vLLM {rows[0]['vllm']}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _worker(request_json: str) -> int:
    request = json.loads(request_json)
    runs = run_condition(Path(request["model"]), request["prefix_caching"], request["conc"], request["tokens"],
                         request["reps"])  # fmt: skip
    import vllm

    print("RESULT " + json.dumps({"vllm": vllm.__version__, "runs": runs}), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.hybrid_host_step",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request and run, one step each (default 64)")
    parser.add_argument("--reps", type=int, default=3, help="runs per concurrency (default 3)")
    parser.add_argument("--conc", default="1,4", help="concurrent requests, a comma list (default 1,4)")
    parser.add_argument("--conditions", default=",".join(str(i) for i in range(len(CONDITIONS))),
                        help="which conditions, by index: " + "; ".join(f"{i} {c.name}" for i, c in
                                                                         enumerate(CONDITIONS)))  # fmt: skip
    parser.add_argument("--out-dir", type=Path, default=E2E_RESULTS)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/hybrid-host-step"))
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per condition's engine run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    try:
        args.conc = [int(c) for c in args.conc.split(",") if c.strip()]
        chosen = [CONDITIONS[int(i)] for i in args.conditions.split(",") if i.strip()]
    except (ValueError, IndexError):
        parser.error(f"--conc {args.conc!r} / --conditions {args.conditions!r}: comma lists of integers "
                     f"(conditions 0-{len(CONDITIONS) - 1})")  # fmt: skip
    if args.tokens < 2 or args.reps < 1 or not args.conc or min(args.conc) < 1 or not chosen:
        parser.error(f"--tokens ≥ 2, --reps ≥ 1, --conc ≥ 1 and a condition are needed; got {args.tokens}, "
                     f"{args.reps}, {args.conc}, {args.conditions!r}")  # fmt: skip
    rows: list[dict[str, Any]] = []
    for i, condition in enumerate(chosen, 1):
        print(f"hybrid_host_step: [{i}/{len(chosen)}] {condition.name} ...", flush=True)
        rows += _condition_in_subprocess(condition, args, args.work_dir)
    command = "python -m benchmarks.e2e.hybrid_host_step " + " ".join(argv if argv is not None else sys.argv[1:])
    for path in write_report(rows, args.out_dir, command.strip()):
        print(f"hybrid_host_step: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
