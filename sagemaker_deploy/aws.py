"""boto3 clients and the translation of AWS failures into one-line messages for the user.

Clients are created without `endpoint_url`, so boto3's own AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>
support applies (the tests point it at a local moto server). Messages name what to set, never a
credential's value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)


class DeployError(RuntimeError):
    """A failure the user can act on; the CLI prints it and exits 1."""


NO_CREDENTIALS = (
    "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for "
    "temporary credentials), or AWS_PROFILE, or run where an IAM role is attached"
)
NO_REGION = "no AWS region: pass --region or set AWS_REGION (or AWS_DEFAULT_REGION)"


@dataclass(frozen=True)
class Clients:
    sagemaker: Any
    runtime: Any
    s3: Any
    region: str


def make_clients(region: str | None) -> Clients:
    session = boto3.Session(region_name=region) if region else boto3.Session()
    if not session.region_name:
        raise DeployError(NO_REGION)
    # Adaptive retries absorb SageMaker's ThrottlingException on the describe polls.
    config = Config(retries={"mode": "adaptive", "max_attempts": 8}, read_timeout=120)
    with aws_errors("create clients"):
        return Clients(
            sagemaker=session.client("sagemaker", config=config),
            runtime=session.client("sagemaker-runtime", config=config),
            s3=session.client("s3", config=config),
            region=session.region_name,
        )


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_not_found(exc: ClientError) -> bool:
    """SageMaker answers a missing model/config/endpoint with ValidationException 'Could not find ...'."""
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return error_code(exc) in ("ValidationException", "ResourceNotFound") and "could not find" in message.lower()


def deploy_error_not_found(exc: DeployError) -> bool:
    """A DeployError raised by aws_errors over SageMaker's "Could not find ..." for the resource asked about."""
    return isinstance(exc.__cause__, ClientError) and is_not_found(exc.__cause__)


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Re-raise botocore failures as DeployError naming the action and what to fix."""
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise DeployError(f"{action}: {NO_CREDENTIALS}") from exc
    except NoRegionError as exc:
        raise DeployError(f"{action}: {NO_REGION}") from exc
    except EndpointConnectionError as exc:
        raise DeployError(
            f"{action}: cannot reach {exc.kwargs.get('endpoint_url')} (network, region, or AWS_ENDPOINT_URL)"
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise DeployError(f"{action}: {error.get('Code', 'error')}: {error.get('Message', exc)}") from exc
    except BotoCoreError as exc:
        raise DeployError(f"{action}: {exc}") from exc
