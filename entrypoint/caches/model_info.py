"""vLLM's model-info cache, made when the image is built, so that no start pays for it.

Before its engine starts, vLLM's API server inspects the model class (text generation or pooling, hybrid,
multimodal, ...). With no entry for the class under VLLM_CACHE_ROOT/modelinfos it does that in a subprocess that
imports vLLM and the model's module once more: 24 s of a 157 s start from empty caches on the H200 (2026-12-03b,
docs/results/start-time.md), ~12 s on the development machine's CPU vLLM. An entry is keyed by the source of the model's
module (vLLM hashes the file), not by the GPU, the weights or the configuration, so the image build makes one for
every architecture vLLM registers, without a GPU (`bake`), and `serve` copies into the run-time cache the entries
it lacks (`seed`) before vLLM starts. An entry whose module changed is stale and vLLM inspects the class itself, as
without this cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BAKED_ENV = "MOE_BAKED_MODEL_INFO"  # where the image keeps the baked cache root (Dockerfile)
# The architectures of the models this image is tuned for: a bake without one of them fails the build (on a builder
# where their modules do not import, the image would silently start 24 s slower for exactly those models).
REQUIRED = ("Qwen3MoeForCausalLM", "MixtralForCausalLM", "DeepseekV3ForCausalLM", "NemotronHForCausalLM",
            "Llama4ForCausalLM", "GptOssForCausalLM")  # fmt: skip
CACHE_ROOT_ENV = "VLLM_CACHE_ROOT"
START_TIME_DOC = "docs/results/start-time.md"  # what the baked caches save at start, measured
FOLDER = "modelinfos"  # vLLM's folder under its cache root (registry._LazyRegisteredModel._get_cache_dir)


@dataclass(frozen=True)
class BakeReport:
    architectures: int
    entries: int
    failed: tuple[str, ...]  # architectures whose module does not import here (optional dependencies)
    seconds: float

    def line(self, root: Path) -> str:
        return (
            f"model info: {self.entries} entries for {self.architectures - len(self.failed)} of "
            f"{self.architectures} architectures in {root / FOLDER} ({self.seconds:.1f} s); "
            f"not importable here: {len(self.failed)}"
        )


def bake(root: Path) -> BakeReport:
    """Inspect every architecture vLLM registers, writing vLLM's own cache entries under root/modelinfos.

    For a fresh process only (the `bake` command): it sets VLLM_CACHE_ROOT and replaces a function of vLLM's
    registry for the rest of the process.
    """
    os.environ[CACHE_ROOT_ENV] = str(root)  # vLLM reads it when it writes an entry
    t0 = time.perf_counter()
    from vllm.model_executor.models import registry
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # as vLLM's inspection subprocess does before it inspects

    # vLLM inspects in a subprocess so that its API server does not initialise CUDA; a build step has no GPU to
    # initialise, and one process for all architectures takes seconds instead of ~10 s each.
    registry._run_in_subprocess = lambda fn: fn()
    archs = sorted(registry.ModelRegistry.get_supported_archs())
    failed = []
    for arch in archs:
        try:
            registry.ModelRegistry.models[arch].inspect_model_cls()
        except Exception:  # any import failure means only that vLLM inspects that class at start
            failed.append(arch)
    entries = list((root / FOLDER).glob("*.json"))
    for entry in entries:  # vLLM writes them 0600 (mkstemp); the image runs as any user, who must read them
        entry.chmod(0o644)
    return BakeReport(len(archs), len(entries), tuple(failed), time.perf_counter() - t0)


def baked_architectures(root: Path) -> set[str]:
    """The class names of root's entries (vLLM names them <module path with dashes>-<class>.json)."""
    return {p.stem.rsplit("-", 1)[-1] for p in (root / FOLDER).glob("*.json")}


def seed(environ: Mapping[str, str]) -> str:
    """Copy the baked entries the run-time cache lacks (an entry already there wins); one log line either way."""
    where, target_root = environ.get(BAKED_ENV), environ.get(CACHE_ROOT_ENV)
    if not where:
        return f"model info: no baked cache ({BAKED_ENV} is not set); vLLM inspects the model class at start"
    baked = Path(where) / FOLDER
    if not target_root:
        return f"model info: baked cache at {baked} not used: {CACHE_ROOT_ENV} is not set"
    if not baked.is_dir():
        return f"model info: no baked cache at {baked}; vLLM inspects the model class at start"
    target = Path(target_root) / FOLDER
    copied = 0
    try:
        target.mkdir(parents=True, exist_ok=True)
        for entry in baked.glob("*.json"):
            if not (target / entry.name).exists():
                shutil.copyfile(entry, target / entry.name)
                copied += 1
    except OSError as err:  # a full or read-only cache root: vLLM inspects the class itself, as without the cache
        return f"model info: baked cache at {baked} not used: copying it failed ({err})"
    return f"model info: {copied} baked entries copied into {target} (no inspection at start; {START_TIME_DOC})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoint.caches.model_info", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("bake", help="write vLLM's model-info entries for every registered architecture")
    make.add_argument("--out", type=Path, required=True, help="the cache root; entries go to OUT/modelinfos")
    ns = parser.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)
    report = bake(ns.out)
    print(report.line(ns.out), flush=True)
    if report.failed:
        print(f"model info: inspected at start instead: {', '.join(report.failed)}", file=sys.stderr)
    missing = sorted(set(REQUIRED) - baked_architectures(ns.out))
    if missing:  # fail the build rather than ship an image that is slower to start for the models it is tuned for
        print(f"model info: no entry for {', '.join(missing)} under {ns.out / FOLDER}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
