"""Everything a deployment needs, decided locally before the first AWS write.

Resolve the configuration on the target instance (a refused configuration stops here), size the
timeouts from the model, turn serving.properties into the container's environment (or put it
beside the weights in S3), and build + validate the SageMaker requests.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.config.settings import read_properties
from entrypoint.model.s3 import S3Location
from entrypoint.resolve.plan import Plan
from entrypoint.utils.errors import ConfigError
from sagemaker_deploy.environment import check_env_limits, properties_to_env
from sagemaker_deploy.instance_plan import plan_for_instance
from sagemaker_deploy.requests import Deployment
from sagemaker_deploy.s3data import data_source, fetch_plan_files, list_objects, parse_model_data, prefix_uri
from sagemaker_deploy.sizing import ModelSize, timeouts_for
from sagemaker_deploy.validation import RequestInvalid

ROLE_FORMAT = "arn:aws:iam::ACCOUNT_ID:role/NAME (make deploy ROLE_ARN=...)"
IMAGE_FORMAT = "ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG (make deploy IMAGE_URI=...)"


@dataclass(frozen=True)
class Request:
    endpoint: str
    instance_type: str
    image_uri: str
    role_arn: str
    properties: Path | None = None
    model: str | None = None  # hub id or s3:// prefix the container downloads at start
    model_data: str | None = None  # s3:// prefix SageMaker mounts at /opt/ml/model
    instance_count: int = 1


@dataclass(frozen=True)
class Prepared:
    deployment: Deployment
    plan: Plan
    size: ModelSize
    upload_properties: Path | None  # serving.properties to put beside the weights, if any
    model_data: S3Location | None


def _require(flag: str, value: str, accepted: str, why: str) -> None:
    if not value.strip():
        raise ConfigError(flag, value, f"is required: {why}", accepted)


def prepare(request: Request, s3: Any | None) -> Prepared:
    _require("--role", request.role_arn, ROLE_FORMAT, "the IAM role SageMaker assumes to pull the image and model")
    _require("--image-uri", request.image_uri, IMAGE_FORMAT, "the image SageMaker runs (push it to ECR first)")
    if request.instance_count < 1:
        raise ConfigError("--instance-count", request.instance_count, "must be at least 1")
    props = read_properties(request.properties) if request.properties else {}
    model_id = request.model or props.get("option.model_id", "").strip() or None

    if request.model_data:
        where = parse_model_data(request.model_data)
        if model_id:
            raise ConfigError(
                "option.model_id",
                model_id,
                f"conflicts with --model-data {prefix_uri(where)} (the model is mounted there)",
                "one of them",
            )
        plan, size = _plan_from_prefix(request, where, s3)
        environment: dict[str, str] = {}
        upload = request.properties
    else:
        where = None
        if not model_id:
            raise ConfigError(
                "option.model_id",
                None,
                "no model to serve",
                "--model-data s3://BUCKET/PREFIX/, --model HUB_ID|s3://..., or option.model_id in --properties",
            )
        if "://" not in model_id and Path(model_id).exists():
            raise ConfigError(
                "--model",
                model_id,
                "is a local path, which SageMaker cannot see",
                "upload it and pass --model-data s3://BUCKET/PREFIX/, or a hub id",
            )
        plan = plan_for_instance(request.instance_type, model=model_id, properties=request.properties)
        size = _size_of_remote(model_id, s3)
        environment = properties_to_env(props)
        if request.model:
            environment["OPTION_MODEL_ID"] = request.model
        upload = None

    check_env_limits(environment)
    timeouts = timeouts_for(size)
    if where is None and size.bytes is not None:
        # Without model data SageMaker downloads nothing: the container fetches the weights itself
        # during the startup health-check window, so that window must hold the download too.
        timeouts = type(timeouts)(timeouts.download_s, min(3600, timeouts.startup_s + timeouts.download_s))
    deployment = Deployment(
        endpoint=request.endpoint,
        instance_type=request.instance_type,
        image_uri=request.image_uri,
        role_arn=request.role_arn,
        environment=environment,
        timeouts=timeouts,
        instance_count=request.instance_count,
        model_data=data_source(where) if where else None,
    )
    try:
        deployment.validate()
    except RequestInvalid as exc:
        raise ConfigError("request", request.endpoint, str(exc)) from exc
    return Prepared(deployment, plan, size, upload, where)


def _plan_from_prefix(request: Request, where: S3Location, s3: Any) -> tuple[Plan, ModelSize]:
    """Fetch the prefix's config files into a scratch directory and resolve against them."""
    objects = list_objects(s3, where)
    scratch = Path(tempfile.mkdtemp(prefix="sagemaker-deploy-"))
    try:
        fetch_plan_files(s3, where, objects, scratch)
        if request.properties:  # the file that will be uploaded beside the weights wins
            shutil.copyfile(request.properties, scratch / "serving.properties")
        plan = plan_for_instance(request.instance_type, model=str(scratch), properties=None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return plan, ModelSize(sum(obj.size for obj in objects), "s3 prefix")


def _size_of_remote(model_id: str, s3: Any) -> ModelSize:
    if model_id.startswith("s3://") and s3 is not None:
        return ModelSize(sum(obj.size for obj in list_objects(s3, parse_model_data(model_id))), "s3 prefix")
    return ModelSize(None, "unknown")
