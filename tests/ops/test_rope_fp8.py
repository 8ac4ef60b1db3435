"""Fused RoPE + FP8: numerics against the float64 reference, and one binary for every batch size.

The compile counts run without a GPU: tests/ops/jit_count.py computes the JIT cache key Triton's
sm_90 JIT would compute for each launch (same binder, same key function). On a GPU the real JIT's
per-device cache is counted too (test_gpu_real_jit_compiles_once).
"""

from __future__ import annotations

import pytest
import torch

from kernel_checks.problems import rope_cos_sin_cache
from kernel_checks.reference import TOLERANCE, rel_err, rope_fp8_reference
from ops.rope_fp8 import BATCH_DEPENDENT_ARGS, jit_binaries, launch_args, rope_fp8, rope_fp8_kernel
from tests.ops.conftest import DEVICE
from tests.ops.jit_count import as_jit_function, cache_keys

FP8 = torch.float8_e4m3fn
MAX_T = 8192


def dequant(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return x.double() * (s.double().reshape(-1, 1, 1) if s.numel() > 1 else s.double())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic-per-token"])
@pytest.mark.parametrize("rot", [64, 48], ids=["full-rotary", "partial-rotary"])
def test_matches_float64_reference(dtype, is_neox, static, rot):
    g = torch.Generator(device=DEVICE).manual_seed(rot + 2 * is_neox + static)
    t, hq, hk, d = 7, 4, 2, 64  # 4 q heads per kv head (GQA); 7 tokens: not a power of two
    q = torch.randn(t, hq, d, generator=g, device=DEVICE).to(dtype)
    k = torch.randn(t, hk, d, generator=g, device=DEVICE).to(dtype)
    pos = torch.randint(0, 512, (t,), generator=g, device=DEVICE)
    cache = rope_cos_sin_cache(512, rot, g, device=DEVICE)
    qs = torch.tensor([0.01], device=DEVICE) if static else None
    ks = torch.tensor([0.02], device=DEVICE) if static else None
    q_out = torch.full(q.shape, float("nan"), device=DEVICE).to(FP8)  # poisoned
    k_out = torch.full(k.shape, float("nan"), device=DEVICE).to(FP8)
    qo, ko, qsc, ksc = rope_fp8(q, k, pos, cache, is_neox=is_neox, q_scale=qs, k_scale=ks, q_out=q_out, k_out=k_out)
    for out, scale, x, s in ((qo, qsc, q, qs), (ko, ksc, k, ks)):
        ref, ref_scale = rope_fp8_reference(
            x.cpu(), pos.cpu(), cache.cpu(), is_neox=is_neox, scale=None if s is None else s.cpu()
        )
        err = rel_err(dequant(out.cpu(), scale.cpu()), ref)
        assert err < TOLERANCE[FP8], f"rel err {err:.3g}"
        assert torch.allclose(scale.cpu().double().reshape(-1), ref_scale.reshape(-1), rtol=1e-6)


def launches(dtype, is_neox, dynamic, step=1):
    """Launch arguments for T = 1..8192 on views of one preallocated qkv buffer (as in CUDA graphs)."""
    hq, hk, d = 8, 2, 128
    qkv = torch.empty(MAX_T, (hq + 2 * hk) * d, dtype=dtype)  # never read: only shapes, strides, pointers
    pos = torch.empty(MAX_T, dtype=torch.int64)
    cache = torch.empty(4096, d, dtype=torch.float32)
    scale = torch.ones(1)
    for t in range(1, MAX_T + 1, step):
        q = qkv[:t, : hq * d].view(t, hq, d)
        k = qkv[:t, hq * d : (hq + hk) * d].view(t, hk, d)
        s = {} if dynamic else dict(q_scale=scale, k_scale=scale)
        _, args, consts, _ = launch_args(q, k, pos[:t], cache, is_neox=is_neox, **s)
        yield args, consts


CONFIGS = [(dt, neox, dyn) for dt in (torch.bfloat16, torch.float16) for neox in (True, False) for dyn in (True, False)]


def test_one_binary_per_config_over_token_counts_1_to_8192():
    jit = as_jit_function(rope_fp8_kernel)
    all_keys = set()
    for cfg in CONFIGS:
        # every T for the first config; every 7th T (all value classes still hit) for the others
        keys = cache_keys(jit, launches(*cfg, step=1 if cfg == CONFIGS[0] else 7))
        assert len(keys) == 1, f"{cfg}: {len(keys)} binaries"
        all_keys |= keys
    assert len(all_keys) == len(CONFIGS)  # and the configs themselves are distinct binaries


def test_counter_catches_recompiles_without_do_not_specialize():
    assert "num_tokens" in BATCH_DEPENDENT_ARGS
    unmarked = as_jit_function(rope_fp8_kernel, do_not_specialize=())
    keys = cache_keys(unmarked, launches(torch.bfloat16, True, True))
    assert len(keys) == 3  # num_tokens == 1, divisible by 16, other


def test_validation_names_shapes():
    q = torch.empty(4, 8, 64, dtype=torch.bfloat16)
    k = torch.empty(4, 2, 64, dtype=torch.bfloat16)
    pos = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"positions must be \(4,\) int32/int64, got \(3,\)"):
        launch_args(q, k, pos[:3], torch.empty(16, 64), is_neox=True)
    with pytest.raises(ValueError, match=r"cos_sin_cache must be .*rot ≤ D=64, got \(16, 128\)"):
        launch_args(q, k, pos, torch.empty(16, 128), is_neox=True)
    with pytest.raises(ValueError, match="both q_scale and k_scale"):
        launch_args(q, k, pos, torch.empty(16, 64), is_neox=True, q_scale=torch.ones(1))


@pytest.mark.gpu
def test_gpu_real_jit_compiles_once():
    dev = torch.cuda.current_device()
    hq, hk, d = 8, 2, 128
    qkv = torch.randn(MAX_T, (hq + 2 * hk) * d, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 4096, (MAX_T,), device="cuda")
    cache = rope_cos_sin_cache(4096, d, torch.Generator(device="cuda").manual_seed(0), device="cuda")
    rope_fp8(qkv[:1, : hq * d].view(1, hq, d), qkv[:1, hq * d : (hq + hk) * d].view(1, hk, d), pos[:1], cache)
    before = jit_binaries(rope_fp8_kernel, dev)
    for t in [*range(1, 300), *range(300, MAX_T + 1, 61), MAX_T]:
        q = qkv[:t, : hq * d].view(t, hq, d)
        k = qkv[:t, hq * d : (hq + hk) * d].view(t, hk, d)
        rope_fp8(q, k, pos[:t], cache, is_neox=True)
    torch.cuda.synchronize()
    assert jit_binaries(rope_fp8_kernel, dev) == before  # no compilation after the first launch
