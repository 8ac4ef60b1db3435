"""The AWS side: create, update, delete and invoke an endpoint (every request validated first)."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from sagemaker_deploy.aws import Clients, DeployError, aws_errors, deploy_error_not_found
from sagemaker_deploy.prepare import Prepared
from sagemaker_deploy.s3data import upload_properties
from sagemaker_deploy.streaming import Final, StreamError, StreamParser, Token, Unreadable
from sagemaker_deploy.validation import validate_request
from sagemaker_deploy.waiter import wait_for_endpoint

SMOKE_PROMPT = "What is a mixture of experts?"


def _call(client: Any, operation: str, method: str, params: dict[str, Any], service: str = "sagemaker") -> Any:
    validate_request(service, operation, params)
    with aws_errors(operation):
        return getattr(client, method)(**params)


def describe_endpoint(clients: Clients, name: str) -> dict[str, Any] | None:
    try:
        with aws_errors("DescribeEndpoint"):
            return clients.sagemaker.describe_endpoint(EndpointName=name)
    except DeployError as exc:
        if deploy_error_not_found(exc):
            return None
        raise


def wait_deadline(prepared: Prepared) -> float:
    """Instance provisioning (≈15 min for large GPU instances) + download + startup windows."""
    return 900 + prepared.deployment.timeouts.download_s + prepared.deployment.timeouts.startup_s


def deploy(prepared: Prepared, clients: Clients, *, wait: bool, smoke: bool, out: TextIO = sys.stderr) -> None:
    d = prepared.deployment
    if describe_endpoint(clients, d.endpoint) is not None:
        raise DeployError(f"endpoint {d.endpoint} already exists: use `update` to change it, or `delete` it first")
    if prepared.upload_properties and prepared.model_data:
        where = upload_properties(clients.s3, prepared.model_data, prepared.upload_properties)
        print(f"uploaded {prepared.upload_properties} to {where}", file=out)
    created: list[tuple[str, str]] = []
    try:
        _call(clients.sagemaker, "CreateModel", "create_model", d.create_model())
        created.append(("model", d.name))
        print(f"created model {d.name}", file=out)
        _call(clients.sagemaker, "CreateEndpointConfig", "create_endpoint_config", d.create_endpoint_config())
        created.append(("config", d.name))
        print(
            f"created endpoint config {d.name} ({d.instance_count}x {d.instance_type}, download timeout "
            f"{d.timeouts.download_s}s, startup timeout {d.timeouts.startup_s}s)",
            file=out,
        )
        _call(clients.sagemaker, "CreateEndpoint", "create_endpoint", d.create_endpoint())
        print(f"creating endpoint {d.endpoint}", file=out)
    except Exception:
        _roll_back(clients, created, out)
        raise
    if wait:
        wait_for_endpoint(clients.sagemaker, d.endpoint, deadline_s=wait_deadline(prepared), out=out)
        if smoke:
            smoke_test(clients, d.endpoint, out)


def _roll_back(clients: Clients, created: list[tuple[str, str]], out: TextIO) -> None:
    for kind, name in reversed(created):
        if kind == "config":
            _delete(clients, "DeleteEndpointConfig", "delete_endpoint_config", {"EndpointConfigName": name}, out)
        else:
            _delete(clients, "DeleteModel", "delete_model", {"ModelName": name}, out)


def update(prepared: Prepared, clients: Clients, *, wait: bool, keep_old: bool, out: TextIO = sys.stderr) -> None:
    d = prepared.deployment
    current = describe_endpoint(clients, d.endpoint)
    if current is None:
        raise DeployError(f"endpoint {d.endpoint} does not exist: use `deploy` to create it")
    old_config = current["EndpointConfigName"]
    old_models = _models_of(clients, old_config)
    if prepared.upload_properties and prepared.model_data:
        print(f"uploaded to {upload_properties(clients.s3, prepared.model_data, prepared.upload_properties)}", file=out)
    validate_request("sagemaker", "UpdateEndpoint", d.update_endpoint())
    created: list[tuple[str, str]] = []
    try:
        _call(clients.sagemaker, "CreateModel", "create_model", d.create_model())
        created.append(("model", d.name))
        _call(clients.sagemaker, "CreateEndpointConfig", "create_endpoint_config", d.create_endpoint_config())
        created.append(("config", d.name))
        _call(clients.sagemaker, "UpdateEndpoint", "update_endpoint", d.update_endpoint())
    except Exception:
        _roll_back(clients, created, out)
        raise
    print(f"updating {d.endpoint}: {old_config} → {d.name} (blue/green, all at once)", file=out)
    if not wait:
        return
    wait_for_endpoint(clients.sagemaker, d.endpoint, deadline_s=wait_deadline(prepared), out=out)
    if keep_old:
        return
    _delete(clients, "DeleteEndpointConfig", "delete_endpoint_config", {"EndpointConfigName": old_config}, out)
    for model in old_models:
        _delete(clients, "DeleteModel", "delete_model", {"ModelName": model}, out)


def _models_of(clients: Clients, config_name: str) -> list[str]:
    try:
        with aws_errors("DescribeEndpointConfig"):
            config = clients.sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    except DeployError as exc:
        if deploy_error_not_found(exc):
            return []
        raise
    return [v["ModelName"] for v in config.get("ProductionVariants", []) if "ModelName" in v]


def _delete(clients: Clients, operation: str, method: str, params: dict[str, Any], out: TextIO) -> bool:
    """Delete one resource; a resource that is already gone is fine (delete is idempotent)."""
    try:
        _call(clients.sagemaker, operation, method, params)
    except DeployError as exc:
        if deploy_error_not_found(exc):
            print(f"{operation} {next(iter(params.values()))}: already gone", file=out)
            return False
        raise
    print(f"{operation} {next(iter(params.values()))}: done", file=out)
    return True


def delete(clients: Clients, endpoint: str, *, wait: bool, out: TextIO = sys.stderr) -> None:
    """Delete the endpoint, its config and the config's models; missing pieces are skipped."""
    current = describe_endpoint(clients, endpoint)
    if current is None:
        print(f"endpoint {endpoint}: not found, nothing to delete", file=out)
        return
    config = current["EndpointConfigName"]
    models = _models_of(clients, config)
    _delete(clients, "DeleteEndpoint", "delete_endpoint", {"EndpointName": endpoint}, out)
    _delete(clients, "DeleteEndpointConfig", "delete_endpoint_config", {"EndpointConfigName": config}, out)
    for model in models:
        _delete(clients, "DeleteModel", "delete_model", {"ModelName": model}, out)
    if wait:
        wait_for_endpoint(clients.sagemaker, endpoint, target="Deleted", deadline_s=1800, poll_s=15, out=out)


def lmi_body(prompt: str, max_new_tokens: int, stream: bool) -> bytes:
    body: dict[str, Any] = {"inputs": prompt, "parameters": {"max_new_tokens": max_new_tokens}}
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


def invoke(clients: Clients, endpoint: str, body: bytes) -> dict[str, Any]:
    params = {"EndpointName": endpoint, "ContentType": "application/json", "Accept": "application/json", "Body": body}
    response = _call(clients.runtime, "InvokeEndpoint", "invoke_endpoint", params, service="sagemaker-runtime")
    raw = response["Body"].read()
    try:
        answer = json.loads(raw)
    except UnicodeDecodeError as exc:  # json.loads decodes bytes itself: a ValueError, not a JSONDecodeError
        raise DeployError(
            f"endpoint {endpoint} answered with bytes that are not UTF-8 ({exc.reason} at byte {exc.start}): "
            f"{raw[:200]!r}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, over-long integers, absurd nesting
        raise DeployError(f"endpoint {endpoint} answered with non-JSON: {raw[:200]!r}") from exc
    return answer if isinstance(answer, dict) else {"answer": answer}


def invoke_stream(clients: Clients, endpoint: str, body: bytes, out: TextIO = sys.stdout) -> Final | None:
    """Print tokens as they arrive; returns the final line (None if the stream had none)."""
    params = {"EndpointName": endpoint, "ContentType": "application/json", "Accept": "application/jsonlines",
              "Body": body}  # fmt: skip
    response = _call(
        clients.runtime,
        "InvokeEndpointWithResponseStream",
        "invoke_endpoint_with_response_stream",
        params,
        service="sagemaker-runtime",
    )
    parser = StreamParser()
    final = None
    with aws_errors("InvokeEndpointWithResponseStream (reading)"):
        for event in response["Body"]:
            if "PayloadPart" in event:
                events = list(parser.feed(event["PayloadPart"]["Bytes"]))
            elif "ModelStreamError" in event or "InternalStreamFailure" in event:
                error = event.get("ModelStreamError") or event.get("InternalStreamFailure") or {}
                raise DeployError(f"stream from {endpoint} failed: {error.get('Message', error)}")
            else:
                continue
            final = _print_events(events, out) or final
        final = _print_events(list(parser.close()), out) or final
    out.write("\n")
    return final


def _print_events(events: list[Any], out: TextIO) -> Final | None:
    final = None
    for event in events:
        if isinstance(event, Token):
            out.write(event.text)
            out.flush()
        elif isinstance(event, Unreadable):
            raise DeployError(f"the endpoint's stream is unreadable: {event.message}")
        elif isinstance(event, StreamError):
            raise DeployError(f"the model stopped with an error (code {event.code}): {event.message}")
        elif isinstance(event, Final):
            final = event
    return final


def smoke_test(clients: Clients, endpoint: str, out: TextIO) -> None:
    answer = invoke(clients, endpoint, lmi_body(SMOKE_PROMPT, 8, stream=False))
    text = answer.get("generated_text")
    if not isinstance(text, str):
        raise DeployError(f"smoke request to {endpoint}: no generated_text in the answer {json.dumps(answer)[:300]}")
    print(f"smoke request answered: {text!r}", file=out)
