"""The backend routing rules, each with its evidence. docs/resolver-rules.md is generated from RULES.

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
    evidence: str
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
        evidence=(
            "vendor: +10% throughput on H200 at low concurrency (vLLM PR #50040, unmerged as of 0.33); vLLM 0.32's "
            "oracle still picks FlashInfer CUTLASS here (tests/entrypoint/resolve/test_backends_vllm.py runs it), the "
            "ratios below were measured with vLLM 0.26 and are not yet repeated with 0.32; measured "
            "here in the served configuration (what `serve` runs: torch.compile + CUDA graphs, vLLM 0.26, H200, "
            "2026-12-01, benchmarks/results/e2e/h200_e2e.csv; random FP8 static weights, 512 in / 256 out, decode "
            "tok/s, best of 3): this plan / vLLM auto (FlashInfer CUTLASS) on Qwen3-30B-A3B = 1.157 / 1.066 / 1.062 "
            "/ 1.056 / 1.066 at 1 / 8 / 16 / 32 / 64 concurrent requests (spread <= 5.6%): no crossover up to 64; "
            "a second lease (h200_e2e_2026-12-01b.csv): 1.153 / 1.085 / 1.024 / 1.064 / 1.070 at 1 / 2 / 4 / 8 / 64 "
            "(two engines of one configuration within 0.3-0.8%); a third (h200_e2e_2026-12-01c.csv) repeated "
            "plan_vllm_kernel and LMI-equivalent within 1.1% of the second at 1; a fourth (h200_e2e_2026-12-01d.csv, "
            "all rows in one lease): 1.144 / 1.085 / 1.015 / 1.055 / 1.059 without our kernel and 1.255 / 1.078 / "
            "1.017 / 1.059 / 1.072 with it (the image's plan), 1.101 / 0.996 / 1.111 / 0.993 / 1.002 of "
            "LMI-equivalent; Mixtral-8x7B served (h200_e2e_2026-12-02.csv): 1.047 / 1.065 / 1.014 / 0.995 at 1 / "
            "16 / 32 / 64 (spread <= 5%; 2-8 inside 5-20% spreads, medians 1.013-1.027), 1.047 on 4096-token prompts; "
            "repeated with LMI-equivalent in one lease (h200_e2e_2026-12-03b.csv): 1.046 / 1.064 / 1.010 / 0.994 of "
            "auto, 1.077 / 1.069 / 1.031 / 0.998 of LMI-equivalent (vLLM's own H200 tile file) at 1 / 16 / 32 / 64; "
            "Nemotron-3-Nano served (h200_e2e_2026-12-02.csv): not readable, one engine's repetitions spread "
            "3-39%, with prefix caching off too (2026-12-03d); the plan never below auto beyond the spread; "
            "the earlier rows without torch.compile (2026-11-30, h200_e2e_compile-none_2026-11-30.csv): 1.135 "
            "Qwen3, 1.092 Nemotron-3-Nano, 1.056 Mixtral-8x7B at 1; 0.970 / 0.995 / 0.990 at 64, inside the spread"
        ),
        applies=_fp8_tensor_static_on_hopper,
    ),
)


def first_matching_rule(ctx: RuleContext) -> Rule | None:
    return next((rule for rule in RULES if rule.matches(ctx)), None)
