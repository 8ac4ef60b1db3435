"""The server's own warm-up, sent before /ping answers 200 (`python -m entrypoint.warmup`, entrypoint.warmup.send).

vLLM compiles some Triton kernels the first time a shape reaches them (on the H200: `fused_moe_kernel` variants for
prefill token counts outside the captured sizes, `_topk_topp_kernel` on the first seeded top-p batch of 8 or more),
which stalls the engine under the first users' requests. The LMI middleware starts this process when the plan says
so (MOE_WARMUP=on, entrypoint.resolve.warmup) and holds /ping and /health at 503 until it exits; it sends the
compile-cache bake's traffic (entrypoint.warmup.traffic) to the server's /invocations, so the shapes a workload can
reach compile during the start, or load from the baked layer when there is one. It exits 0 once every batch was
answered (a 4xx, a prompt over a limit, is logged and skipped) and 1 when the server could not be reached or failed a
request: the middleware then logs why and opens /ping anyway, since serving cold is better than not serving.

The names here are all the resolver (entrypoint.resolve.warmup) and the middleware (entrypoint.lmi.warmup_gate) import:
standard library only, nothing of the planning side reaches vLLM's server process through them.
"""

from __future__ import annotations

WARMUP_ENV = "MOE_WARMUP"  # "on": the middleware starts this process at server start
MAX_SAMPLED_BATCH_ENV = "MOE_WARMUP_MAX_SAMPLED_BATCH"  # a cap on the seeded batches (the CPU engine's)
TIMEOUT_ENV = "MOE_WARMUP_TIMEOUT_S"  # how long /ping waits for the warm-up at most
# A warm-up this long means something is wrong (the H200 bake's traffic is seconds once compiled, a cold one a minute or
# two): serve cold, well inside the 600 s SageMaker startup allowance sagemaker_deploy adds to the weights' load time.
DEFAULT_TIMEOUT_S = 300.0
# On every warm-up request, so the server can leave them out of its access log (1600 lines at each start otherwise).
HEADER = "X-Moe-Serving-Warmup"
# The warm-up's variables: none of them changes what the engine computes or compiles.
WARMUP_ENVS = frozenset({WARMUP_ENV, MAX_SAMPLED_BATCH_ENV, TIMEOUT_ENV})
