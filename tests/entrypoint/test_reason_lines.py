"""Every automatic decision is one short log line: no reason of any plan over the fixture checkpoints is longer than
MAX_REASON_CHARS or spans lines. The measurements behind a decision live in docs/ (the line names the page).

Paths in a reason are the user's own input (the model directory) and are counted from the repository root, so the
test reads the same in any checkout.
"""

from __future__ import annotations

import pytest

from entrypoint.inputs.gather import build_plan
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import FIXTURE_MODELS, REPO

MAX_REASON_CHARS = 200
GPUS = (("H200", 1), ("H100", 1), ("H200", 8), ("cpu", None))
IMAGE_VLLM, OLDER_VLLM = "0.32.0", "0.26.0"  # every option set on the image's vLLM; the older era with defaults
# Option sets the resolver tests use, each turning on other reason lines: the rule, a user's backend, our kernel,
# tensor and expert parallelism (block-FP8 splits), the CPU engine's chunked-prefill note, warm-up, online FP8, and a
# variable vLLM 0.24 removed.
OPTION_SETS = (
    {},
    {"OPTION_MOE_KERNEL": "vllm"},
    {"OPTION_MOE_KERNEL": "project"},
    {"OPTION_MOE_BACKEND": "triton"},
    {"OPTION_TENSOR_PARALLEL_DEGREE": "8"},
    {"OPTION_TENSOR_PARALLEL_DEGREE": "8", "OPTION_ENABLE_EXPERT_PARALLEL": "true"},
    {"OPTION_MAX_ROLLING_BATCH_SIZE": "128", "OPTION_MAX_NUM_BATCHED_TOKENS": "4096"},
    {"OPTION_WARMUP": "on", "TENSOR_PARALLEL_DEGREE": "1", "OPTION_TENSOR_PARALLEL_DEGREE": "1"},
    {"OPTION_QUANTIZE": "fp8"},
    {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_TUNED_CONFIG_FOLDER": "/tuned"},
    {"OPTION_TENSOR_PARALLEL_DEGREE": "2"},  # the CPU engine's binding and shared memory lines
    {"LWS_LEADER_ADDRESS": "10.0.0.1", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"},  # a worker node's lines
)
FIXTURES = sorted(path.name for path in FIXTURE_MODELS.iterdir() if (path / "config.json").is_file())


def _too_long_or_broken(reason: str) -> bool:
    counted = reason.replace(str(REPO) + "/", "")
    return len(counted) > MAX_REASON_CHARS or "\n" in reason


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_reason_is_one_short_line(fixture: str) -> None:
    bad: dict[str, str] = {}
    plans = 0
    cases = [(gpu, IMAGE_VLLM, options) for gpu in GPUS for options in OPTION_SETS]
    cases += [(gpu, OLDER_VLLM, {}) for gpu in GPUS]
    for (gpu, count), version, options in cases:
        try:
            plan = build_plan(
                model=str(FIXTURE_MODELS / fixture), gpu=gpu, num_gpus=count, vllm_version=version,
                environ=options, check_plugin_installed=False,
            )  # fmt: skip
        except ConfigError:  # a refusal is an error message, not a decision
            continue
        plans += 1
        for reason in plan.reasons:
            if _too_long_or_broken(reason):
                bad.setdefault(reason, f"{gpu} x{count}, vLLM {version}, {options}")
    assert plans > 0, "every option set was refused: the test checked nothing"
    assert bad == {}, "\n".join(f"{len(reason)} chars ({where}): {reason}" for reason, where in bad.items())
