"""Correct fp8 downcasts for Triton's CPU interpreter (tests only; the GPU does this in hardware).

Triton's interpreter (`triton.runtime.interpreter._convert_float`, seen in Triton 3.9.0) rounds a
float32 → float8_e4m3fn downcast by adding the cut-off bit to the 3-bit mantissa without carrying into
the exponent: -0.1248 becomes -0.0625 instead of -0.125 (and ties round up, not to even). Every
value just under a power of two is off by a factor of two, which would make every fp8 kernel look
wrong by ~8%. `patch_fp8_downcast()` routes those downcasts through torch's cast (round to nearest
even, the same as the GPU's `cvt.rn.satfinite` for in-range values, which our kernels guarantee by
clamping to ±448 first) and leaves every other conversion to Triton.
"""

from __future__ import annotations

import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter

_TORCH_FP8 = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
_TORCH_SRC = {tl.float32: torch.float32, tl.float16: torch.float16, tl.bfloat16: torch.bfloat16}
_original = interpreter._convert_float


def _convert_float(input, input_dtype, output_dtype, rounding_mode):
    if output_dtype in _TORCH_FP8 and input_dtype in _TORCH_SRC:
        src = torch.from_numpy(np.ascontiguousarray(input).copy()).view(_TORCH_SRC[input_dtype])
        out = src.to(torch.float32).to(_TORCH_FP8[output_dtype]).view(torch.uint8)
        return out.numpy().reshape(input.shape)
    return _original(input, input_dtype, output_dtype, rounding_mode)


def patch_fp8_downcast() -> None:
    """Install the fix (idempotent)."""
    interpreter._convert_float = _convert_float
