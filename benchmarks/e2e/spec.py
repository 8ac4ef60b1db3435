"""What to measure: bundled benchmark models, workloads (input/output lengths × concurrency), MoE shapes.

Pure Python (no vLLM, no torch): the harness plans and checks a run on a machine without a GPU. The per-GPU
(E, N) split is kernels.shapes.moe_partition, the same function the resolver uses.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.shapes import moe_partition

MODELS_DIR = Path(__file__).resolve().parent / "models"

# Order matters only for display; the first model is the default run's.
BUNDLED_MODELS: tuple[str, ...] = (
    "qwen3-30b-a3b-fp8-static",
    "nemotron-3-nano-30b-a3b-fp8",
    "mixtral-8x7b-fp8-static",
    "qwen3-30b-a3b-fp8-block",
    # families the image ships no tuned tiles for (issue 32: tuned on the GPU by `python -m entrypoint tune`)
    "glm-4.5-air-fp8-static",
    "phi-3.5-moe-fp8-static",
    # 8 x H200 (issue 16): tensor and expert parallel
    "qwen3-235b-a22b-fp8-static",
    "qwen3-235b-a22b-fp8-block",
    "deepseek-v3-fp8-block",
    "mixtral-8x22b-fp8-static",
    "llama-4-maverick-fp8",
)


@dataclass(frozen=True)
class Workload:
    """One measured point: every request has `input_len` prompt tokens and exactly `output_len` new ones."""

    input_len: int
    output_len: int
    conc: int

    @property
    def key(self) -> str:
        return f"{self.input_len}x{self.output_len}@{self.conc}"


@dataclass(frozen=True)
class MoEShape:
    """The model's routed experts as config.json states them, and the split the engine runs them with; the (E, N)
    that name vLLM's tuned Triton config file come from ``partition``."""

    num_experts: int
    intermediate: int  # moe_intermediate_size: N in the config file name at TP=1
    top_k: int
    block_shape: tuple[int, int] | None
    tp: int = 1  # tensor_parallel_size the engine runs with
    expert_parallel: bool = False

    @property
    def partition(self) -> tuple[int, int]:
        """(E, N) on one GPU, as vLLM looks its tuned file up."""
        return moe_partition(self.num_experts, self.intermediate, self.tp, self.expert_parallel)

    def config_file_prefix(self) -> str:
        e, n = self.partition
        return f"E={e},N={n},"


def parse_int_list(text: str, what: str) -> tuple[int, ...]:
    """'1,8,64' → (1, 8, 64); positive, no duplicates, sorted. ValueError names `what` and the bad value."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ValueError(f"{what}: {text!r} is not a comma-separated list of integers, e.g. 1,8,64") from exc
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{what}: {text!r} must list positive integers, e.g. 1,8,64")
    return tuple(sorted(set(values)))


def build_workloads(
    conc: tuple[int, ...], input_len: int, output_len: int, long_input_len: int, long_conc: tuple[int, ...]
) -> tuple[Workload, ...]:
    """The short-context grid over all concurrencies, then the long-context row (empty when long_input_len=0)."""
    rows = [Workload(input_len, output_len, c) for c in conc]
    if long_input_len > 0:
        rows += [Workload(long_input_len, output_len, c) for c in long_conc]
    return tuple(rows)


def resolve_model_dir(name_or_path: str) -> Path:
    """A bundled model name (see BUNDLED_MODELS) or a directory holding a config.json."""
    candidate = MODELS_DIR / name_or_path
    if (candidate / "config.json").is_file():
        return candidate
    path = Path(name_or_path)
    if (path / "config.json").is_file():
        return path.resolve()
    raise ValueError(
        f"--models: {name_or_path!r} is neither a bundled model nor a directory with a config.json; "
        f"bundled: {', '.join(BUNDLED_MODELS)}"
    )


def model_label(model_dir: Path) -> str:
    return model_dir.name


def load_config(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / "config.json").read_text())


def moe_shape(config: dict[str, Any], tp: int = 1, expert_parallel: bool = False) -> MoEShape:
    """Resolve the aliases families use for the expert count and width (text_config nests multimodal ones); tp and
    expert_parallel are the engine's split (engine arguments tensor_parallel_size, enable_expert_parallel)."""
    cfg = config.get("text_config", config)
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    width = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    top_k = cfg.get("num_experts_per_tok")
    if not (experts and width and top_k):
        raise ValueError(
            "config.json: not a mixture-of-experts model (needs num_local_experts/num_experts/n_routed_experts, "
            "moe_intermediate_size/intermediate_size and num_experts_per_tok)"
        )
    quant = config.get("quantization_config") or {}
    block = quant.get("weight_block_size")
    block_shape = (int(block[0]), int(block[1])) if block else None
    return MoEShape(int(experts), int(width), int(top_k), block_shape, tp, expert_parallel)


def num_layers(config: dict[str, Any]) -> int:
    return int(config.get("text_config", config)["num_hidden_layers"])


def with_layers(model_dir: Path, layers: int, work_dir: Path) -> Path:
    """Copy the model dir with `layers` decoder layers, for when the real count does not fit in memory.

    NemotronH names each layer's kind in `hybrid_override_pattern`; it is cut to the same length so the
    model keeps its own mix of Mamba, attention and MoE layers in order.
    """
    config = load_config(model_dir)
    real = num_layers(config)
    if not 0 < layers <= real:
        raise ValueError(f"--layers: {layers} must be between 1 and the model's {real} layers")
    out = work_dir / f"{model_dir.name}-L{layers}"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(model_dir, out)
    config["num_hidden_layers"] = layers
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        config["hybrid_override_pattern"] = pattern[:layers]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out
