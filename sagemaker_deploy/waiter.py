"""Wait for an endpoint with a deadline, printing each status change and a heartbeat.

boto3's `endpoint_in_service` waiter gives up after 60 min with no progress output; large models
need a deadline sized from the model and users want to see that something is happening.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from sagemaker_deploy.aws import DeployError, aws_errors, deploy_error_not_found

TRANSITIONAL = {"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"}


def wait_for_endpoint(
    sagemaker: Any,
    name: str,
    *,
    target: str = "InService",
    deadline_s: float,
    poll_s: float = 30.0,
    out: TextIO = sys.stderr,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll DescribeEndpoint until `target` ("InService", or "Deleted" for a deletion)."""
    start = clock()
    last = None
    while True:
        try:
            with aws_errors(f"describe endpoint {name}"):
                described = sagemaker.describe_endpoint(EndpointName=name)
        except DeployError as exc:
            if target == "Deleted" and deploy_error_not_found(exc):
                print(f"[{clock() - start:6.0f}s] {name}: deleted", file=out, flush=True)
                return {}
            raise
        status = described["EndpointStatus"]
        elapsed = clock() - start
        if status != last:
            print(f"[{elapsed:6.0f}s] {name}: {status}", file=out, flush=True)
            last = status
        if status == target:
            return described
        if status not in TRANSITIONAL:
            reason = described.get("FailureReason", "no reason given")
            raise DeployError(
                f"endpoint {name} is {status}: {reason} (CloudWatch log group /aws/sagemaker/Endpoints/{name})"
            )
        if elapsed > deadline_s:
            raise DeployError(
                f"endpoint {name} still {status} after {deadline_s:.0f}s; it keeps going in AWS (delete it or wait)"
            )
        sleep(poll_s)
