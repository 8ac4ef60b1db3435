"""Model MoE shapes → the (E, N) that vLLM's Triton fused-MoE kernel sees on one GPU.

vLLM looks its tuned tile file up by E = local experts (``w2.shape[0]``) and N = per-partition
intermediate size (``w2.shape[2]``): tensor parallelism splits the expert width (N = I / tp),
expert parallelism splits the experts (E = E_total / ep, N = I). The GEMM shapes the kernel runs:

    GEMM1  (M·topk, H) × (E, N1, H)ᵀ → (M, topk, N1)   N1 = 2·N for gated activations (SiLU·up), N otherwise
    GEMM2  (M·topk, N) × (E, H, N)ᵀ  → (M, topk, H)

Figures come from each model's config.json (hidden_size, moe_intermediate_size / intermediate_size,
num_experts / num_local_experts / n_routed_experts, num_experts_per_tok).
"""

from __future__ import annotations

from dataclasses import dataclass

BLOCK_FP8 = (128, 128)


def moe_partition(num_experts: int, intermediate: int, tp: int, expert_parallel: bool) -> tuple[int, int]:
    """(E, N) as vLLM's fused-MoE kernel sees them on one GPU of ``tp`` ranks: expert parallelism splits the experts
    (each rank holds whole experts, E = num_experts / tp, N = intermediate); otherwise tensor parallelism splits each
    expert's width (E = num_experts, N = intermediate / tp). The one definition: the resolver (entrypoint), the
    shapes below and the end-to-end benchmark (benchmarks/e2e/spec.py) all call it.
    """
    if expert_parallel:
        return num_experts // tp, intermediate
    return num_experts, intermediate // tp


@dataclass(frozen=True)
class ModelMoE:
    """One model's routed-expert block, as written in its config.json."""

    name: str
    hidden: int  # H
    expert_width: int  # I (moe_intermediate_size)
    experts: int  # routed experts, all ranks
    topk: int
    gated: bool = True  # SiLU·up (w13 = 2I rows); Nemotron-3 uses non-gated relu²
    block_fp8: bool = False  # checkpoint ships 128×128 block-scaled FP8 weights
    router_weight_on_input: bool = False  # Llama-4 multiplies the router weight before GEMM1


@dataclass(frozen=True)
class KernelShape:
    """What one GPU's kernel sees for a model at a given TP/EP split."""

    model: ModelMoE
    tp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        if self.model.expert_width % self.tp:
            raise ValueError(
                f"tp={self.tp} does not divide expert_width={self.model.expert_width} of {self.model.name}"
            )
        if self.model.experts % self.ep:
            raise ValueError(f"ep={self.ep} does not divide experts={self.model.experts} of {self.model.name}")
        if self.model.block_fp8 and self.n % BLOCK_FP8[0]:
            raise ValueError(f"block FP8 needs N={self.n} (per-partition width) divisible by {BLOCK_FP8[0]}")

    @property
    def key(self) -> str:
        """Stable id used on the command line, in results files and CSVs: ``qwen3-30b-a3b:tp1``."""
        return f"{self.model.name}:tp{self.tp}" + (f"ep{self.ep}" if self.ep > 1 else "")

    @property
    def partition(self) -> tuple[int, int]:
        """(E, N) on one GPU. ``tp1ep8`` = 8 ranks holding whole experts (vLLM's EP group is the TP × DP group)."""
        expert_parallel = self.ep > 1
        ranks = self.ep if expert_parallel else self.tp
        return moe_partition(self.model.experts, self.model.expert_width, ranks, expert_parallel)

    @property
    def e(self) -> int:
        return self.partition[0]

    @property
    def n(self) -> int:
        return self.partition[1]

    @property
    def n1(self) -> int:
        """Rows of w13 (GEMM1's N)."""
        return 2 * self.n if self.model.gated else self.n

    @property
    def h(self) -> int:
        return self.model.hidden

    @property
    def topk(self) -> int:
        return self.model.topk

    @property
    def dtype(self) -> str:
        return "fp8_w8a8"

    @property
    def block_shape(self) -> list[int] | None:
        return list(BLOCK_FP8) if self.model.block_fp8 else None

    def weight_bytes_per_expert(self) -> int:
        """FP8 bytes of one expert's w13 + w2 slice on this GPU (1 byte per weight)."""
        return self.n1 * self.h + self.h * self.n


MODELS: dict[str, ModelMoE] = {
    m.name: m
    for m in (
        ModelMoE("qwen3-30b-a3b", hidden=2048, expert_width=768, experts=128, topk=8),
        ModelMoE("qwen3-235b-a22b", hidden=4096, expert_width=1536, experts=128, topk=8),
        ModelMoE("mixtral-8x7b", hidden=4096, expert_width=14336, experts=8, topk=2),
        ModelMoE("mixtral-8x22b", hidden=6144, expert_width=16384, experts=8, topk=2),
        ModelMoE("deepseek-v3", hidden=7168, expert_width=2048, experts=256, topk=8, block_fp8=True),
        ModelMoE("nemotron-3-nano-30b-a3b", hidden=2688, expert_width=1856, experts=128, topk=6, gated=False),
        ModelMoE("llama-4-scout", hidden=5120, expert_width=8192, experts=16, topk=1, router_weight_on_input=True),
        ModelMoE("llama-4-maverick", hidden=5120, expert_width=8192, experts=128, topk=1, router_weight_on_input=True),
    )
}

# Every shape the image ships a tuned file for, in tuning priority order (device time is scarce:
# the first four are the single-GPU and DeepSeek cases users hit most).
SHIPPED: tuple[KernelShape, ...] = (
    KernelShape(MODELS["qwen3-30b-a3b"], tp=1),
    KernelShape(MODELS["mixtral-8x7b"], tp=1),
    KernelShape(MODELS["nemotron-3-nano-30b-a3b"], tp=1),
    KernelShape(MODELS["deepseek-v3"], tp=8),
    KernelShape(MODELS["qwen3-30b-a3b"], tp=2),
    KernelShape(MODELS["qwen3-235b-a22b"], tp=4),
    KernelShape(MODELS["qwen3-235b-a22b"], tp=8),
    KernelShape(MODELS["mixtral-8x7b"], tp=2),
    KernelShape(MODELS["mixtral-8x22b"], tp=4),
    KernelShape(MODELS["mixtral-8x22b"], tp=8),
    KernelShape(MODELS["llama-4-scout"], tp=4),
    KernelShape(MODELS["llama-4-scout"], tp=8),
    KernelShape(MODELS["llama-4-maverick"], tp=4),
    KernelShape(MODELS["llama-4-maverick"], tp=8),
)


def shape_by_key(key: str) -> KernelShape:
    """Parse ``model:tpN[epM]`` (e.g. ``deepseek-v3:tp8``); error names the accepted models."""
    model_name, _, split = key.partition(":")
    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r} in shape {key!r}; accepted: {', '.join(sorted(MODELS))}")
    tp, ep = 1, 1
    if split:
        rest = split
        if not rest.startswith("tp"):
            raise ValueError(f"shape {key!r}: split must look like tp8 or tp1ep8")
        rest = rest[2:]
        tp_s, _, ep_s = rest.partition("ep")
        if not tp_s.isdigit() or (ep_s and not ep_s.isdigit()):
            raise ValueError(f"shape {key!r}: split must look like tp8 or tp1ep8")
        tp, ep = int(tp_s), int(ep_s or 1)
    return KernelShape(MODELS[model_name], tp=tp, ep=ep)
