"""Fused rotary embedding + FP8 quantisation of q and k, compiled once for every batch size.

Data flow per token t (one program walks tokens t = pid, pid + grid, ... < num_tokens):
    q[t] (Hq, D), k[t] (Hk, D) 16-bit ─ rotate the first `rot` channels by cos/sin[positions[t]]
    (neox: halves; gpt-j: interleaved pairs) in float32 ─ scale: static per-tensor, or dynamic
    per token (amax over all heads / 448, written to q_scale_out/k_scale_out) ─▶ fp8 e4m3 q, k.

Why `do_not_specialize`: Triton specialises every integer argument by value class (== 1, divisible
by 16, other), so an argument that follows the batch (the token count, a token stride of a view of a
batch-sized buffer) would compile up to three binaries as the batch changes during serving: seconds
of JIT each time, inside a request. Every such argument is listed in BATCH_DEPENDENT_ARGS; the
tests count the JIT cache keys over token counts 1..8192 and expect one.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from ops.fp8_quant import dynamic_scale, quantize

# Integer arguments whose value can change with the batch; never specialised on.
BATCH_DEPENDENT_ARGS = ("num_tokens", "stride_qt", "stride_kt", "stride_qot", "stride_kot")
# Programs per SM of the persistent grid: each program handles several tokens when the batch is large.
PROGRAMS_PER_SM = 4


@triton.jit
def _rope_quant_heads(
    x_ptr,  # this token's (HEADS, D) 16-bit heads, head stride D
    o_ptr,  # this token's (HEADS, D) float8_e4m3fn output
    cos_ptr,  # (rot/2,) float32 row of the cos/sin cache for this position; sin follows at + rot/2
    scale_in_ptr,  # (1,) float32 static scale
    scale_out_ptr,  # this token's float32 slot for the dynamic scale
    HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROT: tl.constexpr,
    IS_NEOX: tl.constexpr,
    DYNAMIC: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    half = ROT // 2
    if IS_NEOX:
        partner = tl.where(d < half, d + half, d - half)
        sign = tl.where(d < half, -1.0, 1.0)
        idx = d % half
    else:
        partner = d ^ 1
        sign = tl.where(d % 2 == 0, -1.0, 1.0)
        idx = d // 2
    rotated = d < ROT
    cos = tl.load(cos_ptr + idx, mask=rotated, other=1.0)
    sin = tl.load(cos_ptr + half + idx, mask=rotated, other=0.0)
    m = (h[:, None] < HEADS) & (d[None, :] < HEAD_DIM)
    x = tl.load(x_ptr + h[:, None] * HEAD_DIM + d[None, :], mask=m, other=0.0).to(tl.float32)
    xp = tl.load(x_ptr + h[:, None] * HEAD_DIM + partner[None, :], mask=m & rotated[None, :], other=0.0)
    y = x * cos[None, :] + sign[None, :] * xp.to(tl.float32) * sin[None, :]
    if DYNAMIC:
        s = dynamic_scale(tl.max(tl.max(tl.abs(y), axis=1), axis=0))
        tl.store(scale_out_ptr, s)
    else:
        s = tl.load(scale_in_ptr)
    q = quantize(y, s)
    tl.store(o_ptr + h[:, None] * HEAD_DIM + d[None, :], q, mask=m)


@triton.jit(do_not_specialize=BATCH_DEPENDENT_ARGS)
def rope_fp8_kernel(
    q_ptr,  # (T, Hq, D) bf16/fp16, heads contiguous per token
    k_ptr,  # (T, Hk, D) bf16/fp16
    pos_ptr,  # (T,) int32/int64 positions
    cache_ptr,  # (max_pos, rot) float32 [cos | sin]
    qo_ptr,  # (T, Hq, D) float8_e4m3fn
    ko_ptr,  # (T, Hk, D) float8_e4m3fn
    q_scale_ptr,  # (1,) float32 static q scale | (T,) float32 dynamic q scales (out)
    k_scale_ptr,  # (1,) float32 static k scale | (T,) float32 dynamic k scales (out)
    num_tokens,
    stride_qt,
    stride_kt,
    stride_qot,
    stride_kot,
    stride_cache,
    HQ: tl.constexpr,
    HK: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROT: tl.constexpr,
    IS_NEOX: tl.constexpr,
    DYNAMIC: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Persistent grid (G,): program g handles tokens g, g + G, ..."""
    for t in range(tl.program_id(0), num_tokens, tl.num_programs(0)):
        t64 = tl.cast(t, tl.int64)
        pos = tl.load(pos_ptr + t64).to(tl.int64)
        row = cache_ptr + pos * stride_cache
        _rope_quant_heads(
            q_ptr + t64 * stride_qt, qo_ptr + t64 * stride_qot, row, q_scale_ptr, q_scale_ptr + t64,
            HQ, HEAD_DIM, ROT, IS_NEOX, DYNAMIC, BLOCK_HQ, BLOCK_D,
        )  # fmt: skip
        _rope_quant_heads(
            k_ptr + t64 * stride_kt, ko_ptr + t64 * stride_kot, row, k_scale_ptr, k_scale_ptr + t64,
            HK, HEAD_DIM, ROT, IS_NEOX, DYNAMIC, BLOCK_HK, BLOCK_D,
        )  # fmt: skip


def jit_binaries(kernel: Any, device: int) -> int:
    """Binaries the JIT holds for `kernel` on `device` (Triton ≥ 3.2: device_caches; older: cache)."""
    caches = getattr(kernel, "device_caches", None)
    if caches is not None:
        return len(caches[device][0])
    return len(kernel.cache[device])


def _shape(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {t.dtype}"


def launch_args(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    *,
    is_neox: bool,
    q_scale: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
    num_sms: int = 132,
) -> tuple[tuple[int], tuple[Any, ...], dict[str, Any], tuple[torch.Tensor, ...]]:
    """Validate and build (grid, positional args, constexpr kwargs, outputs) for rope_fp8_kernel.

    Shared by `rope_fp8` and the compile-count tests, so the tests see exactly the launch's arguments."""
    if q.dim() != 3 or k.dim() != 3 or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"q must be (T, Hq, D) and k (T, Hk, D) with the same T and D, got {_shape(q)}, {_shape(k)}")
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype:
        raise ValueError(f"q and k must both be bf16 or fp16, got {_shape(q)}, {_shape(k)}")
    t, hq, d = q.shape
    hk = k.shape[1]
    if q.stride(2) != 1 or q.stride(1) != d or k.stride(2) != 1 or k.stride(1) != d:
        raise ValueError(f"q/k heads must be contiguous within a token, got strides {q.stride()}, {k.stride()}")
    if positions.shape != (t,) or positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"positions must be ({t},) int32/int64, got {_shape(positions)}")
    rot = cos_sin_cache.shape[-1] if cos_sin_cache.dim() == 2 else -1
    if rot <= 0 or rot % 2 or rot > d or cos_sin_cache.dtype != torch.float32 or cos_sin_cache.stride(1) != 1:
        raise ValueError(
            f"cos_sin_cache must be (max_pos, rot) float32 with even rot ≤ D={d}, got {_shape(cos_sin_cache)}"
        )
    if (q_scale is None) != (k_scale is None):
        raise ValueError("pass both q_scale and k_scale (static) or neither (dynamic per token)")
    for name, s in (("q_scale", q_scale), ("k_scale", k_scale)):
        if s is not None and (s.numel() != 1 or s.dtype != torch.float32):
            raise ValueError(f"{name} must be a (1,) float32 static scale, got {_shape(s)}")
    dynamic = q_scale is None
    fp8 = torch.float8_e4m3fn
    q_out = torch.empty(q.shape, dtype=fp8, device=q.device) if q_out is None else q_out
    k_out = torch.empty(k.shape, dtype=fp8, device=k.device) if k_out is None else k_out
    if q_out.shape != q.shape or k_out.shape != k.shape or q_out.dtype != fp8 or k_out.dtype != fp8:
        raise ValueError(f"q_out/k_out must be float8_e4m3fn {tuple(q.shape)}/{tuple(k.shape)}, got "
                         f"{_shape(q_out)}, {_shape(k_out)}")  # fmt: skip
    if dynamic:
        q_scale = torch.empty((t,), dtype=torch.float32, device=q.device)
        k_scale = torch.empty((t,), dtype=torch.float32, device=q.device)
    grid = (max(1, min(t, PROGRAMS_PER_SM * num_sms)),)
    args = (
        q, k, positions, cos_sin_cache, q_out, k_out, q_scale, k_scale,
        t, q.stride(0), k.stride(0), q_out.stride(0), k_out.stride(0), cos_sin_cache.stride(0),
    )  # fmt: skip
    consts = dict(
        HQ=hq, HK=hk, HEAD_DIM=d, ROT=rot, IS_NEOX=bool(is_neox), DYNAMIC=dynamic,
        BLOCK_HQ=triton.next_power_of_2(hq), BLOCK_HK=triton.next_power_of_2(hk), BLOCK_D=triton.next_power_of_2(d),
    )  # fmt: skip
    return grid, args, consts, (q_out, k_out, q_scale, k_scale)


def rope_fp8(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    *,
    is_neox: bool = True,
    q_scale: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rotate q (T, Hq, D) and k (T, Hk, D) by cos_sin_cache[positions] and quantise them to fp8.

    cos_sin_cache (max_pos, rot) float32 = [cos | sin] (vLLM's layout); channels ≥ rot pass through.
    Static: q_scale, k_scale (1,) float32 → returned as given. Dynamic (both None): per-token
    scales (T,) float32 = amax over the token's heads / 448. Returns (q_fp8, k_fp8, q_scale, k_scale).
    """
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.device.type == "cuda" else 132
    grid, args, consts, outs = launch_args(
        q, k, positions, cos_sin_cache, is_neox=is_neox, q_scale=q_scale, k_scale=k_scale,
        q_out=q_out, k_out=k_out, num_sms=sms,
    )  # fmt: skip
    if q.shape[0] > 0:
        rope_fp8_kernel[grid](*args, **consts, num_warps=4)
    return outs
