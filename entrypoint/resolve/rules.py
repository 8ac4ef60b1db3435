"""The backend routing rules, each with its reason and its evidence page. docs/resolver-rules.md is generated from
RULES.

A rule overrides vLLM's automatic choice only where a measurement says it pays. Everything a rule
does not match is left to vLLM (`--moe-backend` not passed) and the plan reports what vLLM's oracle
will pick (entrypoint.resolve.backends.predict_vllm_auto).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from entrypoint.config.moe import MoeBackend
from entrypoint.model.types import ModelDescription
from entrypoint.resolve.backends import HOPPER


@dataclass(frozen=True)
class RuleContext:
    model: ModelDescription
    sm: int
    max_num_seqs: int | None  # the concurrency bound; None = vLLM's default
    expert_parallel: bool


@dataclass(frozen=True)
class Rule:
    id: str
    condition: str  # human wording for the docs/resolver-rules.md table
    backend: MoeBackend  # --moe-backend value the rule passes
    vllm_default: str  # what vLLM picks by itself in that case
    why: str  # a few words for the plan's one reason line
    evidence: str  # the docs page with the measurements (dated runs, ratios, spreads, CSVs)
    applies: Callable[[RuleContext], bool]
    # A measured crossover: above this many concurrent sequences the rule stops applying.
    # None = no crossover measured (the rule holds at every concurrency measured so far).
    max_concurrency: int | None = None

    def matches(self, ctx: RuleContext) -> bool:
        if not self.applies(ctx):
            return False
        return self.max_concurrency is None or ctx.max_num_seqs is None or ctx.max_num_seqs <= self.max_concurrency


def _fp8_tensor_static_on_hopper(ctx: RuleContext) -> bool:
    return ctx.sm == HOPPER and ctx.model.is_moe and ctx.model.quantization.is_fp8_per_tensor_static


RULES: tuple[Rule, ...] = (
    Rule(
        id="fp8-tensor-static-hopper-triton",
        condition=(
            "SM90 (H100/H200), MoE, FP8 per-tensor weights with static per-tensor activation scales "
            "(native fp8 `activation_scheme: static`, ModelOpt FP8, compressed-tensors tensor/static)"
        ),
        backend=MoeBackend.TRITON,
        vllm_default="flashinfer_cutlass",
        why="1.24x at 1 request on H200, within 2 % of vLLM's pick up to 128",
        evidence="docs/results/backend-rule.md",
        applies=_fp8_tensor_static_on_hopper,
    ),
)


def first_matching_rule(ctx: RuleContext) -> Rule | None:
    return next((rule for rule in RULES if rule.matches(ctx)), None)
