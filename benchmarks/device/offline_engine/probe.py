"""Which distributions of a bundle's site does the serve path import, and which imports does it try and miss?

Imports the modules an H200 engine serving an FP8 MoE model loads at start (vLLM's server and engine core, the
Qwen3-MoE / Mixtral / NemotronH models, the fused-MoE layer with its Triton and FlashInfer CUTLASS experts, FA3
and Triton attention, FlashInfer's sampler, torch.compile's Inductor, the project's serve path, plugin, ops and e2e
harness) and reports, per distribution of SITE, whether any of its modules was imported. It runs without a GPU:
what a module imports inside a function that only a GPU reaches is out of its sight (the bundle's README lists
those checked by reading vLLM's source).

    PYTHONPATH=SITE:REPO python3.12 -m benchmarks.device.offline_engine.probe SITE [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path

SERVE_PATH = (
    "torch",
    "torch._inductor.compile_fx",
    "triton",
    "triton.compiler",
    "flashinfer",
    "flashinfer.fused_moe",
    "flashinfer.sampling",
    "vllm",
    "vllm.entrypoints.cli.main",
    "vllm.entrypoints.cli.serve",
    "vllm.entrypoints.openai.api_server",
    "vllm.engine.arg_utils",
    "vllm.v1.engine.async_llm",
    "vllm.v1.engine.core",
    "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.gpu_worker",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.structured_output",
    "vllm.v1.sample.sampler",
    "vllm.v1.sample.ops.topk_topp_sampler",
    "vllm.v1.attention.backends.flash_attn",
    "vllm.v1.attention.backends.triton_attn",
    "vllm.v1.attention.backends.flashinfer",
    "vllm.vllm_flash_attn",
    "vllm.compilation.backends",
    "vllm.distributed.device_communicators.pynccl",
    "vllm.distributed.device_communicators.cuda_communicator",
    "vllm.model_executor.models.qwen3_moe",
    "vllm.model_executor.models.mixtral",
    "vllm.model_executor.models.nemotron_h",
    "vllm.model_executor.layers.fused_moe",
    "vllm.model_executor.layers.fused_moe.fused_moe",
    "vllm.model_executor.layers.fused_moe.experts.flashinfer_cutlass_moe",
    "vllm.model_executor.layers.fused_moe.experts.triton_moe",
    "vllm.model_executor.layers.fused_moe.oracle.fp8",
    "vllm.model_executor.layers.fused_moe.router.gate_linear",
    "vllm.model_executor.kernels.linear.cute_dsl.ll_bf16",
    "vllm.model_executor.layers.quantization.fp8",
    "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors",
    "vllm.model_executor.model_loader.default_loader",
    "vllm.model_executor.model_loader.dummy_loader",
    "vllm.tokenizers",
    "vllm.renderers.chat_utils",
    "vllm.entrypoints.serve.sagemaker",
    "entrypoint.serve",
    "entrypoint.cli",
    "entrypoint.moe_plugin.hook",
    "entrypoint.lmi",
    "entrypoint.warmup",
    "ops.fused_moe_fp8",
    "ops.fp8_quant",
    "ops.rope_fp8",
    "kernels.aot",
    "benchmarks.e2e.runner",
    "benchmarks.e2e.served",
    "benchmarks.e2e.random_checkpoint",
)


class Recorder:
    """A meta path finder that only notes the top-level names asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        self.asked.add(fullname.split(".")[0])
        return None


def top_levels(site: Path) -> dict[str, str]:
    """top-level import name -> distribution, from the RECORD files of site."""
    out: dict[str, str] = {}
    for record in site.glob("*.dist-info/RECORD"):
        dist = record.parent.name.split("-")[0]
        for line in record.read_text().splitlines():
            first = line.split(",")[0].split("/")[0]
            if first.endswith((".dist-info", ".data")) or first in ("..", "bin", ""):
                continue
            name = first.removesuffix(".py").split(".")[0]
            out.setdefault(name, dist)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--modules", nargs="*", default=list(SERVE_PATH))
    args = ap.parse_args(argv)
    site = args.site.resolve()
    recorder = Recorder()
    sys.meta_path.insert(0, recorder)
    failed = {}
    for name in args.modules:
        try:
            importlib.import_module(name)
        except BaseException as e:  # report every failure, go on
            failed[name] = "".join(traceback.format_exception_only(e)).strip()[-400:]
    sys.meta_path.remove(recorder)
    owners = top_levels(site)
    loaded_from_site: dict[str, set[str]] = {}
    loaded_elsewhere: dict[str, str] = {}
    for modname, mod in list(sys.modules.items()):
        top = modname.split(".")[0]
        file = getattr(mod, "__file__", None) or ""
        if "." in modname or not file:
            continue
        if Path(file).resolve().is_relative_to(site):
            loaded_from_site.setdefault(owners.get(top, "?" + top), set()).add(top)
        elif "site-packages" in file:
            loaded_elsewhere[top] = file
    dists = sorted({d for d in owners.values()})
    report = {
        "failed": failed,
        "site_dists_imported": sorted(loaded_from_site),
        "site_dists_not_imported": [d for d in dists if d not in loaded_from_site],
        "host_modules_imported": dict(sorted(loaded_elsewhere.items())),
        "asked_but_missing": sorted(n for n in recorder.asked
                                    if n not in sys.modules and n not in sys.builtin_module_names),
    }  # fmt: skip
    for key, value in report.items():
        print(f"== {key} ({len(value)})")
        items = value.items() if isinstance(value, dict) else ((v, "") for v in value)
        for k, v in items:
            print(f"   {k} {v}".rstrip())
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
