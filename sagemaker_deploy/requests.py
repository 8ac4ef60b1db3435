"""The SageMaker requests of a deployment, built as plain dicts and validated before any is sent."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sagemaker_deploy.sizing import Timeouts
from sagemaker_deploy.validation import RequestInvalid, validate_request

VARIANT = "AllTraffic"
NAME_MAX = 63  # EndpointName / ModelName / EndpointConfigName


def utc_stamp(now: float | None = None) -> str:
    """UTC time to the millisecond: a `deploy` and an `update` of one endpoint within a second get distinct names."""
    now = time.time() if now is None else now
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"


def resource_name(endpoint: str, stamp: str | None = None) -> str:
    """`<endpoint>-<UTC timestamp>` for the model and endpoint config, within SageMaker's 63 characters."""
    stamp = stamp or utc_stamp()
    return f"{endpoint[: NAME_MAX - len(stamp) - 1].rstrip('-')}-{stamp}"


@dataclass(frozen=True)
class Deployment:
    endpoint: str
    instance_type: str
    image_uri: str
    role_arn: str
    environment: dict[str, str]
    timeouts: Timeouts
    instance_count: int = 1
    model_data: dict[str, Any] | None = None  # ModelDataSource, or None when the model comes from env
    resource: str = field(default="")  # model + endpoint-config name; resource_name(endpoint) by default

    def __post_init__(self) -> None:
        # Stamp the name once: computed per request, CreateEndpoint could name a config one second
        # newer than the one CreateEndpointConfig made (seen on a loaded CI machine).
        if not self.resource:
            object.__setattr__(self, "resource", resource_name(self.endpoint))

    @property
    def name(self) -> str:
        return self.resource

    def create_model(self) -> dict[str, Any]:
        container: dict[str, Any] = {"Image": self.image_uri, "Environment": dict(self.environment)}
        if self.model_data:
            container["ModelDataSource"] = self.model_data
        return {"ModelName": self.name, "ExecutionRoleArn": self.role_arn, "PrimaryContainer": container}

    def create_endpoint_config(self) -> dict[str, Any]:
        variant = {
            "VariantName": VARIANT,
            "ModelName": self.name,
            "InstanceType": self.instance_type,
            "InitialInstanceCount": self.instance_count,
            "InitialVariantWeight": 1.0,
            "ModelDataDownloadTimeoutInSeconds": self.timeouts.download_s,
            "ContainerStartupHealthCheckTimeoutInSeconds": self.timeouts.startup_s,
        }
        return {"EndpointConfigName": self.name, "ProductionVariants": [variant]}

    def create_endpoint(self) -> dict[str, Any]:
        return {"EndpointName": self.endpoint, "EndpointConfigName": self.name}

    def update_endpoint(self) -> dict[str, Any]:
        """Blue/green: the new fleet is built beside the old one, traffic moves at once when it is
        healthy, the old fleet is kept 5 minutes for a rollback."""
        return {
            "EndpointName": self.endpoint,
            "EndpointConfigName": self.name,
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
                    "TerminationWaitInSeconds": 300,
                    "MaximumExecutionTimeoutInSeconds": min(
                        28800, max(600, self.timeouts.download_s + self.timeouts.startup_s + 1800)
                    ),
                }
            },
        }

    def validate(self, *, update: bool = False) -> None:
        """Every request of the deployment; one RequestInvalid listing the problems of all of them."""
        last = ("UpdateEndpoint", self.update_endpoint()) if update else ("CreateEndpoint", self.create_endpoint())
        problems = []
        for operation, params in (
            ("CreateModel", self.create_model()),
            ("CreateEndpointConfig", self.create_endpoint_config()),
            last,
        ):
            try:
                validate_request("sagemaker", operation, params)
            except RequestInvalid as exc:
                problems.append(str(exc))
        if problems:
            raise RequestInvalid("\n".join(problems))
