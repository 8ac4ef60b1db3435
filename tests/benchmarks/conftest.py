"""The sweep's tests import our kernels (ops/) while tests/benchmarks is collected, before tests/ops: Triton's
interpreter must be chosen (TRITON_INTERPRET, read when @triton.jit decorates) before that first import, exactly
as tests/ops/conftest.py does for its own tests."""

import tests.ops.conftest  # noqa: F401 (sets TRITON_INTERPRET=1 and the fp8 fix when there is no GPU)
