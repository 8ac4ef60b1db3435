"""How far the top-20 logprobs of the engine test's random checkpoint move for a given error in every MoE output.

The engine test (tests/entrypoint/moe_plugin/test_plugin_engine_gpu.py) bounds the plugin's logprob difference;
this float32 CPU model of the same checkpoint recipe (benchmarks/e2e/random_checkpoint.py: Qwen3-30B-A3B shapes,
4 layers, weights N(0, 1/fan_in), unit embeddings, logits of std LOGIT_STD) says what that bound means: the worst
|Δ logprob| over shared top-20 tokens of the last 8 positions when each MoE output gets a relative random error
(what two correct kernels differ by: 1.5-2.2 % at the layer level on this shape), against gross faults (the output
zeroed, doubled, or the first expert of every token replaced). No FP8 rounding and no GPU: a sensitivity estimate,
not a replay of the engine.

    python -m benchmarks.e2e.logprob_sensitivity [--levels 0.01,0.02,0.03] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import torch

from benchmarks.e2e.random_checkpoint import LOGIT_STD

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
EXPERTS, INTER, TOP_K, LAYERS, VOCAB, TOKENS = 128, 768, 8, 4, 151936, 64
FAULTS = ("zero", "double", "wrong_expert")


def rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float = 1e6) -> torch.Tensor:
    d = x.shape[-1]
    freqs = pos[:, None].float() / theta ** (torch.arange(0, d, 2).float() / d)[None]
    cos, sin = freqs.cos(), freqs.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


@dataclass
class Model:
    layers: list[dict[str, torch.Tensor]]
    embed: torch.Tensor
    lm_head: torch.Tensor

    @classmethod
    def random(cls, seed: int = 0) -> Model:
        gen = torch.Generator().manual_seed(seed)

        def linear(out: int, fan_in: int) -> torch.Tensor:
            return torch.randn(out, fan_in, generator=gen) / math.sqrt(fan_in)

        layers = [
            {"q": linear(HEADS * HEAD_DIM, HIDDEN), "k": linear(KV_HEADS * HEAD_DIM, HIDDEN),
             "v": linear(KV_HEADS * HEAD_DIM, HIDDEN), "o": linear(HIDDEN, HEADS * HEAD_DIM),
             "gate": linear(EXPERTS, HIDDEN),
             "w13": (torch.randn(EXPERTS, 2 * INTER, HIDDEN, generator=gen) / math.sqrt(HIDDEN)).bfloat16(),
             "w2": (torch.randn(EXPERTS, HIDDEN, INTER, generator=gen) / math.sqrt(INTER)).bfloat16()}
            for _ in range(LAYERS)
        ]  # fmt: skip
        embed = torch.randn(TOKENS, HIDDEN, generator=gen)  # the prompt's embeddings
        return cls(layers, embed, torch.randn(VOCAB, HIDDEN, generator=gen) * (LOGIT_STD / math.sqrt(HIDDEN)))

    def log_probs(self, noise: float = 0.0, fault: str | None = None, seed: int = 0) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        pos = torch.arange(TOKENS)
        causal = torch.triu(torch.ones(TOKENS, TOKENS, dtype=torch.bool), 1)
        h = self.embed.clone()
        for p in self.layers:
            x = rms_norm(h)
            q = rope(rms_norm((x @ p["q"].T).view(TOKENS, HEADS, HEAD_DIM)).transpose(0, 1), pos)
            k = rope(rms_norm((x @ p["k"].T).view(TOKENS, KV_HEADS, HEAD_DIM)).transpose(0, 1), pos)
            v = (x @ p["v"].T).view(TOKENS, KV_HEADS, HEAD_DIM).transpose(0, 1)
            k, v = k.repeat_interleave(HEADS // KV_HEADS, 0), v.repeat_interleave(HEADS // KV_HEADS, 0)
            att = ((q @ k.transpose(1, 2)) / math.sqrt(HEAD_DIM)).masked_fill(causal, float("-inf")).softmax(-1)
            h = h + (att @ v).transpose(0, 1).reshape(TOKENS, HEADS * HEAD_DIM) @ p["o"].T
            x = rms_norm(h)
            weights, ids = (x @ p["gate"].T).softmax(-1).topk(TOP_K, -1)
            weights = weights / weights.sum(-1, keepdim=True)
            out = torch.zeros(TOKENS, HIDDEN)
            for t in range(TOKENS):
                for j in range(TOP_K):
                    e = int(ids[t, j])
                    if fault == "wrong_expert" and j == 0:
                        e = (e + 1) % EXPERTS
                    gate_up = p["w13"][e].float() @ x[t]
                    out[t] += weights[t, j] * (p["w2"][e].float() @ (torch.nn.functional.silu(gate_up[:INTER]) *
                                                                     gate_up[INTER:]))  # fmt: skip
            if noise:
                out = out + noise * out.norm(dim=-1, keepdim=True) / math.sqrt(HIDDEN) * torch.randn(
                    TOKENS, HIDDEN, generator=gen
                )
            out = {"zero": torch.zeros_like(out), "double": 2 * out}.get(fault or "", out)
            h = h + out
        return (rms_norm(h) @ self.lm_head.T).log_softmax(-1)


def worst_top20_gap(a: torch.Tensor, b: torch.Tensor, last: int = 8) -> float:
    def top20(row: torch.Tensor) -> dict[int, float]:
        best = row.topk(20)
        return dict(zip(best.indices.tolist(), best.values.tolist(), strict=True))

    worst = 0.0
    for t in range(TOKENS - last, TOKENS):
        ta, tb = top20(a[t]), top20(b[t])
        worst = max([worst, *(abs(ta[i] - tb[i]) for i in set(ta) & set(tb))])
    return round(worst, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="0.01,0.02,0.03", help="relative errors added to every MoE output")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    model = Model.random()
    base = model.log_probs()
    print("| change to every MoE output | worst |Δ logprob| (nats), one value per seed |\n|---|---|")
    for level in (float(x) for x in args.levels.split(",")):
        gaps = [worst_top20_gap(base, model.log_probs(noise=level, seed=s)) for s in range(args.seeds)]
        print(f"| {level:.1%} random error | {' / '.join(map(str, gaps))} |", flush=True)
    for fault in FAULTS:
        print(f"| {fault} | {worst_top20_gap(base, model.log_probs(fault=fault))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
