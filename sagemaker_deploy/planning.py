"""What the container will decide on a SageMaker instance, computed locally (no AWS call).

The model is given as a local checkpoint directory, a hub id, or (for deploy) a temporary
directory holding the config files fetched from the S3 prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from entrypoint.plan import Plan
from sagemaker_deploy.instances import accelerators_for


def plan_for_instance(
    instance_type: str,
    *,
    model: str | None,
    properties: Path | None,
    environ: dict[str, str] | None = None,
) -> Plan:
    """The resolver's Plan on `instance_type`; ConfigError when the container would refuse it.

    `environ` defaults to empty, not os.environ: the endpoint's environment is what deploy sends,
    not the environment of the machine running this tool.
    """
    from entrypoint.planning import build_plan  # the resolver pipeline (heavy imports kept lazy)

    gpus = accelerators_for(instance_type)
    return build_plan(
        model=model,
        properties=properties,
        gpu=gpus.gpu,
        num_gpus=gpus.count,
        environ={} if environ is None else environ,
    )


def plan_json(plan: Plan, instance_type: str) -> dict[str, Any]:
    """`entrypoint resolve --json` keys plus the instance type."""
    data = plan.to_json_dict()
    data["instance_type"] = instance_type
    return data


def plan_text(plan: Plan, instance_type: str) -> str:
    gpus = accelerators_for(instance_type)
    lines = [
        f"instance:    {instance_type} ({gpus.count}x {gpus.gpu})",
        f"model:       {plan.model}",
        f"moe backend: {plan.moe_backend} (effective {plan.effective_moe_backend}, from {plan.moe_backend_source})",
        f"vllm:        {plan.vllm_version} ({plan.vllm_version_source})",
        "command:     vllm serve " + " ".join(plan.vllm_args),
    ]
    lines += [f"env:         {k}={v}" for k, v in sorted(plan.env.items())]
    lines += [f"why:         {reason}" for reason in plan.reasons]
    lines += [f"ignored:     {key}" for key in plan.ignored_options]
    return "\n".join(lines)
