"""Count the binaries Triton's JIT would compile for a list of launches, without a GPU.

Triton keys its in-memory kernel cache by `compute_cache_key(specialization, options)`, where the
specialization comes from the kernel's *binder* (`create_function_from_signature`): per argument the
type plus, unless the argument is `do_not_specialize`, its value class (== 1, divisible by 16, other)
and pointer alignment. `JITFunction.run` compiles exactly when that key is new for the device. We
build the same binder for an sm_90 CUDA target (no driver needed) and count distinct keys — the
number of compilations the launches would cause on an H200. Works with Triton 3.3-3.9's jit.py
(`create_function_from_signature(sig, params, backend)`, `compute_cache_key`); the GPU tests check
the same count through the real JIT's device cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import JITFunction, compute_cache_key, create_function_from_signature

H200 = GPUTarget("cuda", 90, 32)


def as_jit_function(kernel: Any, do_not_specialize: Sequence[str] | None = None) -> JITFunction:
    """The kernel as a JITFunction (also when TRITON_INTERPRET made it an InterpretedFunction).

    `do_not_specialize` overrides the kernel's own marking (None keeps it)."""
    fn = kernel.fn
    if do_not_specialize is None:
        do_not_specialize = getattr(kernel, "do_not_specialize", None)
        if do_not_specialize is None:  # InterpretedFunction keeps the decorator's kwargs
            do_not_specialize = kernel.kwargs.get("do_not_specialize") or ()
    return JITFunction(fn, do_not_specialize=list(do_not_specialize))


def cache_keys(jit_fn: JITFunction, launches: Iterable[tuple[tuple[Any, ...], dict[str, Any]]]) -> set[str]:
    """Distinct JIT cache keys over (args, kwargs) launches, as the sm_90 JIT would compute them."""
    binder = create_function_from_signature(jit_fn.signature, jit_fn.params, make_backend(H200))
    keys: set[str] = set()
    for args, kwargs in launches:
        _, specialization, options = binder(*args, **kwargs)
        keys.add(compute_cache_key({}, specialization, options))
    return keys
