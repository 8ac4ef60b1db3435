"""What the container will decide on a SageMaker instance, computed locally (no AWS call).

The model is given as a local checkpoint directory, a hub id, or (for deploy) a temporary
directory holding the config files fetched from the S3 prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from entrypoint.config.settings import DEFAULT_PROPERTIES_ENV, DEFAULT_PROPERTIES_PATH
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.render import render_plan
from sagemaker_deploy.instances import accelerators_for

# The vLLM the image pins (Dockerfile ARG VLLM_VERSION; tests/docker/test_dockerfile.py keeps them equal):
# the plan is for the container, not for whatever vLLM this machine has installed.
IMAGE_VLLM_VERSION = "0.32.0"


def image_default_properties() -> Path | None:
    """The serving.properties the image falls back to: the image's copy, else the repository's."""
    for candidate in (Path(DEFAULT_PROPERTIES_PATH), Path(__file__).resolve().parents[1] / "serving.properties"):
        if candidate.is_file():
            return candidate
    return None


def plan_for_instance(
    instance_type: str,
    *,
    model: str | None,
    properties: Path | None,
    environ: dict[str, str] | None = None,
    vllm_version: str = IMAGE_VLLM_VERSION,
) -> Plan:
    """The resolver's Plan on `instance_type`; ConfigError when the container would refuse it.

    `environ` defaults to empty, not os.environ: the endpoint's environment is what deploy sends,
    not the environment of the machine running this tool. Like the container, the plan falls back
    to the image's default serving.properties when neither --properties nor the model has one.
    """
    from entrypoint.inputs.gather import build_plan  # the resolver pipeline (heavy imports kept lazy)

    gpus = accelerators_for(instance_type)
    env = dict(environ or {})
    default = image_default_properties()
    if default is not None:
        env.setdefault(DEFAULT_PROPERTIES_ENV, str(default))
    return build_plan(
        model=model, properties=properties, gpu=gpus.gpu, num_gpus=gpus.count, vllm_version=vllm_version, environ=env,
        check_plugin_installed=False,  # the endpoint runs the image, which installs the package and its entry point
    )  # fmt: skip


def plan_json(plan: Plan, instance_type: str) -> dict[str, Any]:
    """`entrypoint resolve --json` keys plus the instance type (secrets redacted, as there)."""
    data = plan.to_json_dict()
    data["instance_type"] = instance_type
    return data


def plan_text(plan: Plan, instance_type: str) -> str:
    """The plan as deploy prints it: resolve's table, the instance first (secrets such as --api-key as ***)."""
    gpus = accelerators_for(instance_type)
    return render_plan(plan, first_rows=[("instance", f"{instance_type} ({gpus.count}x {gpus.gpu})")])
