"""vLLM's own config lookup for the tuner's tests (``vllm_lookup``, tests/vllm_moe_lookup.py)."""

from tests.vllm_moe_lookup import vllm_lookup  # noqa: F401 (a fixture, found here by name)
