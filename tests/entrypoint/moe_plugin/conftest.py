"""The plugin's tests run our kernel: on the CPU under Triton's interpreter, chosen before ops/ is imported."""

from tests.ops.conftest import device, pytest_runtest_setup  # noqa: F401 (TRITON_INTERPRET, the gpu marker rule)
