"""Benchmark backend names → how the engine is started (``moe_backend`` engine arg + environment).

- ``auto``: no ``moe_backend``; vLLM's own choice.
- ``plan``: what this project's resolver decides (``entrypoint.inputs.gather.build_plan``), i.e. what ``serve`` runs.
- ``triton``: ``moe_backend="triton"`` on vLLM's shipped/default tiles (VLLM_TUNED_CONFIG_FOLDER unset).
- ``triton_tuned``: ``triton`` with VLLM_TUNED_CONFIG_FOLDER=kernels/configs (this project's tiles).
- ``flashinfer_cutlass``: ``moe_backend="flashinfer_cutlass"``.

Two backends that would start the same engine are run once: the second row points at the first
(``same_engine_as``), which saves a 40–170 s engine start per duplicate on a rationed GPU.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.e2e.spec import MoEShape
from entrypoint.moe_plugin import GEMM1_PDL_ENV, KERNEL_ENV  # KERNEL_ENV: the plan's switch for our kernel
from entrypoint.moe_plugin.fold_routing import FOLD_ENV
from entrypoint.utils.response_format import RESPONSE_FORMAT_ENVS
from entrypoint.warmup import WARMUP_ENVS

# plan_vllm_kernel: the plan with option.moe_kernel=vllm (vLLM's kernels only), what the plugin adds is plan / it.
# plan_fold: the plan with the router's top-k folded into our kernel (MOE_SERVING_FOLD_ROUTING=1, issue 33; not what
# serve runs until it ships): a labelled comparison row, what the fold adds is plan / plan_fold.
# plan_fold_pdl: plan_fold with our GEMM1 launched under PDL behind the router GEMM (MOE_SERVING_GEMM1_PDL=1, issue 33
# step 3): what PDL adds on top of the fold is plan_fold / plan_fold_pdl.
# plan_pdl: the plan with only GEMM1 under PDL, behind vLLM's top-k (the fold lost on the whole block at M = 1,
# 2026-12-05: PDL alone is what step 3 can still ship): what PDL adds is plan / plan_pdl.
PLAN_ROWS = ("plan", "plan_vllm_kernel", "plan_fold", "plan_fold_pdl", "plan_pdl")
# the comparison rows' switches, each only in its own rows (served.py drops an exported one from the others)
ROW_SWITCHES: dict[str, dict[str, str]] = {
    "plan_fold": {FOLD_ENV: "1"},
    "plan_fold_pdl": {FOLD_ENV: "1", GEMM1_PDL_ENV: "1"},
    "plan_pdl": {GEMM1_PDL_ENV: "1"},
}
SWITCH_ENVS = (FOLD_ENV, GEMM1_PDL_ENV)
BACKENDS: tuple[str, ...] = ("auto", *PLAN_ROWS, "triton", "triton_tuned", "flashinfer_cutlass")
REPO_ROOT = Path(__file__).resolve().parents[2]
TUNED_DIR = REPO_ROOT / "kernels" / "configs"
TUNED_ENV = "VLLM_TUNED_CONFIG_FOLDER"


@dataclass(frozen=True)
class EngineSetup:
    backend: str  # the benchmark's name for the row
    moe_backend: str | None  # engine argument; None = not passed (vLLM auto)
    env: Mapping[str, str] = field(default_factory=dict)  # set for the engine process
    unset_env: tuple[str, ...] = ()  # removed from the engine process's environment
    note: str = ""
    same_engine_as: str | None = None  # another backend's engine is identical: reuse its numbers
    error: str = ""  # set when no engine can be started for this row (e.g. the resolver refused)

    @property
    def starts_engine(self) -> bool:
        """This row starts an engine of its own: no plan error, not a copy of another row's engine."""
        return not self.error and not self.same_engine_as

    def engine_kwargs(self) -> dict[str, Any]:
        return {"moe_backend": self.moe_backend} if self.moe_backend else {}


@dataclass(frozen=True)
class PlanDecision:
    moe_backend: str  # "auto" when the resolver passes no --moe-backend
    env: Mapping[str, str]
    source: str  # "resolver" (build_plan ran here) or "snapshot:<file>"


PlanProvider = Callable[[Path], PlanDecision]


def parse_backends(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"--backends: {text!r} has unknown {unknown}; accepted: {', '.join(BACKENDS)}")
    return names


def tuned_files_for(shape: MoEShape, tuned_dir: Path = TUNED_DIR) -> list[Path]:
    """Files in tuned_dir vLLM would look up for this shape (any device name; fp8 per-tensor or block)."""
    if not tuned_dir.is_dir():
        return []
    block = f"block_shape=[{shape.block_shape[0]},{shape.block_shape[1]}]" if shape.block_shape else None
    found = []
    for path in sorted(tuned_dir.glob(f"{shape.config_file_prefix()}*.json")):
        has_block = "block_shape=" in path.name
        if (block is None and not has_block) or (block is not None and block in path.name):
            found.append(path)
    return found


def _fixed_setup(backend: str, shape: MoEShape, tuned_dir: Path) -> EngineSetup:
    if backend == "auto":
        return EngineSetup("auto", None, unset_env=(TUNED_ENV, KERNEL_ENV), note="vLLM's own choice")
    if backend == "triton":
        return EngineSetup(
            "triton", "triton", unset_env=(TUNED_ENV, KERNEL_ENV), note="vLLM's shipped/default tiles (LMI v28/v29)"
        )
    if backend == "flashinfer_cutlass":
        return EngineSetup("flashinfer_cutlass", "flashinfer_cutlass", unset_env=(TUNED_ENV, KERNEL_ENV))
    if backend == "triton_tuned":
        files = tuned_files_for(shape, tuned_dir)
        note = (
            "tuned: " + ", ".join(f.name for f in files)
            if files
            else f"no file {shape.config_file_prefix()}... in {tuned_dir}: same tiles as triton"
        )
        return EngineSetup(
            "triton_tuned", "triton", env={TUNED_ENV: str(tuned_dir)}, unset_env=(KERNEL_ENV,), note=note
        )
    raise ValueError(f"backend {backend!r}: accepted {', '.join(BACKENDS)}")


def _plan_setup(decision: PlanDecision, tuned_dir: Path) -> EngineSetup:
    env = dict(decision.env)
    note = f"resolver ({decision.source}): moe_backend={decision.moe_backend}"
    folder = env.get(TUNED_ENV)
    if folder is not None:
        named = Path(folder) if Path(folder).is_absolute() else REPO_ROOT / folder  # a snapshot's are relative
        if named.is_dir():
            env[TUNED_ENV] = str(named)
        else:  # the plan names the image's path; outside the image the same files live in the repo
            env[TUNED_ENV] = str(tuned_dir)
            note += f"; {TUNED_ENV} {folder} -> {tuned_dir}"
    unset = () if TUNED_ENV in env else (TUNED_ENV,)
    moe = None if decision.moe_backend in ("", "auto") else decision.moe_backend
    return EngineSetup("plan", moe, env=env, unset_env=unset, note=note)


# the server's own settings: two engines that differ only in these run the same engine
SERVER_ONLY_ENVS = frozenset({*WARMUP_ENVS, *RESPONSE_FORMAT_ENVS})


def _identity(setup: EngineSetup, shape: MoEShape) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What the engine really runs: a tuned-config folder with no file for this shape changes nothing, nor does the
    kernel variable naming vLLM's kernel, the server's warm-up or the shape of its LMI answers."""
    env = {k: v for k, v in setup.env.items() if k not in SERVER_ONLY_ENVS}
    folder = env.get(TUNED_ENV)
    if folder is not None and not tuned_files_for(shape, Path(folder)):
        del env[TUNED_ENV]
    if KERNEL_ENV in env and env[KERNEL_ENV] != "project":  # the plugin runs ours only on "project"; "vllm" = unset
        del env[KERNEL_ENV]
    return (setup.moe_backend or "auto", tuple(sorted(env.items())))


def engine_setups(
    backends: Sequence[str],
    model_dir: Path,
    shape: MoEShape,
    plan_provider: PlanProvider | None,
    tuned_dir: Path = TUNED_DIR,
) -> list[EngineSetup]:
    """One setup per requested backend, in order; a duplicate points at the first identical engine."""
    setups: list[EngineSetup] = []
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    for name in backends:
        if name in PLAN_ROWS:
            if plan_provider is None:
                raise ValueError("backend 'plan' needs the resolver or a plan snapshot; neither is available")
            try:
                setup = _plan_setup(plan_provider(model_dir), tuned_dir)
            except Exception as exc:  # the resolver's refusal is a result to report, not a crash
                setups.append(EngineSetup(name, None, note="resolver refused", error=f"{type(exc).__name__}: {exc}"))
                continue
            if name == "plan_vllm_kernel":
                env = {k: v for k, v in setup.env.items() if k != KERNEL_ENV}
                unset = (*setup.unset_env, KERNEL_ENV)
                setup = replace(setup, backend=name, env=env, unset_env=unset, note=setup.note + "; moe_kernel=vllm")
            elif name in ROW_SWITCHES:
                switches = ROW_SWITCHES[name]
                said = ", ".join(f"{k}={v}" for k, v in switches.items())
                env = {**setup.env, **switches}
                setup = replace(setup, backend=name, env=env, note=setup.note + f"; {said} (comparison row)")
        else:
            setup = _fixed_setup(name, shape, tuned_dir)
        key = _identity(setup, shape)
        if key in seen:
            setup = replace(setup, same_engine_as=seen[key])
        else:
            seen[key] = name
        setups.append(setup)
    return setups


def plan_from_resolver(model_dir: Path, gpu: str | None = None, vllm_version: str | None = None) -> PlanDecision:
    """Ask this project's resolver (imports entrypoint; fails where its dependencies are missing). vllm_version: the
    vLLM the plan is for (None: the installed one, as `serve` plans; the image's when none is installed)."""
    from entrypoint.inputs.gather import build_plan

    plan = build_plan(model=str(model_dir), gpu=gpu, vllm_version=vllm_version)
    said = "".join(f" {k}={v}" for k, v in (("gpu", gpu), ("vllm", vllm_version)) if v)
    return PlanDecision(plan.moe_backend, dict(plan.env), "resolver" + said)


def load_plan_snapshot(path: Path) -> tuple[dict[str, PlanDecision], str]:
    """plans.json written by `python -m benchmarks.e2e plans`: (model dir name → decision, the vLLM it plans for)."""
    data = json.loads(path.read_text())
    plans = {
        name: PlanDecision(entry["moe_backend"], entry.get("env", {}), f"snapshot:{path.name}")
        for name, entry in data["plans"].items()
    }
    return plans, str(data.get("vllm", "unknown"))


def make_plan_provider(
    snapshot: Path | None, gpu: str | None, vllm_version: str | None = None
) -> tuple[PlanProvider | None, str]:
    """The resolver if importable here, else the snapshot; the string says which (for the log)."""
    try:
        import entrypoint.inputs.gather  # noqa: F401
    except Exception as exc:  # ImportError, or a dependency of it missing on a bare GPU host
        if snapshot is None or not snapshot.is_file():
            return None, f"resolver unavailable ({type(exc).__name__}: {exc}) and no plan snapshot"
        plans, planned_for = load_plan_snapshot(snapshot)
        why = f"resolver unavailable: {exc}"
        if vllm_version and planned_for != vllm_version:
            why += f"; the snapshot plans for vLLM {planned_for}, not the {vllm_version} asked"

        def from_snapshot(model_dir: Path) -> PlanDecision:
            if model_dir.name not in plans:
                raise ValueError(f"plan snapshot {snapshot} has no entry for {model_dir.name}")
            return plans[model_dir.name]

        return from_snapshot, f"plan snapshot {snapshot} ({why})"
    return (lambda model_dir: plan_from_resolver(model_dir, gpu, vllm_version)), "resolver (entrypoint.inputs.gather)"
