"""SageMaker instance types → the accelerators the resolver should plan for.

Only GPU instances the resolver knows (entrypoint/resolve/gpu.py KNOWN_GPUS) are listed; every name is also
checked against botocore's ProductionVariantInstanceType enum (tests/sagemaker_deploy/test_units.py),
so a typo here cannot reach CreateEndpointConfig.
"""

from __future__ import annotations

from typing import NamedTuple

from entrypoint.utils.errors import ConfigError


class Accelerators(NamedTuple):
    gpu: str  # a name entrypoint.resolve.gpu.simulate_gpus accepts
    count: int


def _family(prefix: str, gpu: str, counts: dict[str, int]) -> dict[str, Accelerators]:
    return {f"{prefix}.{size}": Accelerators(gpu, n) for size, n in counts.items()}


# g5/g6/g6e share one layout: a single GPU up to 16xlarge, 4 at 12x/24xlarge, 8 at 48xlarge.
_G_SIZES = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
            "48xlarge": 8}  # fmt: skip

INSTANCE_GPUS: dict[str, Accelerators] = {
    "ml.p5e.48xlarge": Accelerators("H200", 8),
    "ml.p5en.48xlarge": Accelerators("H200", 8),
    "ml.p5.48xlarge": Accelerators("H100", 8),
    "ml.p5.4xlarge": Accelerators("H100", 1),
    # p4de carries the 80 GB A100; the resolver's table has one A100 entry (40 GB), so plans for
    # p4de are conservative on memory.
    "ml.p4d.24xlarge": Accelerators("A100", 8),
    "ml.p4de.24xlarge": Accelerators("A100", 8),
    "ml.p6-b200.48xlarge": Accelerators("B200", 8),
    **_family("ml.g6e", "L40S", _G_SIZES),
    **_family("ml.g5", "A10G", _G_SIZES),
    **_family("ml.g6", "L4", _G_SIZES),
}


def accelerators_for(instance_type: str) -> Accelerators:
    """The GPUs of `instance_type`; ConfigError listing the known types otherwise."""
    try:
        return INSTANCE_GPUS[instance_type]
    except KeyError:
        raise ConfigError(
            "--instance-type",
            instance_type,
            "not a GPU instance type this tool can plan for",
            sorted(INSTANCE_GPUS),
        ) from None
