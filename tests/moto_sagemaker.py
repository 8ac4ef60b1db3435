"""A local SageMaker + S3 stand-in for the sagemaker_deploy tests: moto 5.2.5 in server mode.

`MotoSageMaker` runs moto's ThreadedMotoServer on 127.0.0.1 (free port), so the code under test
talks real HTTP through boto3 with AWS_ENDPOINT_URL pointing at it. moto's SageMaker mock has three
gaps, filled here in the server process only (nothing in sagemaker_deploy knows about them):

1. CreateEndpointConfig checks InstanceType against a hard-coded list from ~2020 without
   ml.p4d/p5/p5e/p5en/p6 (ml.p5e.48xlarge → ValidationException). Real SageMaker accepts every
   value of botocore's ProductionVariantInstanceType enum (277 values), so the mock is made to
   check against that enum instead: still a real check (a made-up type is refused), current list.
2. UpdateEndpoint is not implemented (moto answers "not yet implemented"). Added: it switches the
   endpoint to the new config; like every moto endpoint, it is InService at once.
3. InvokeEndpointWithResponseStream is not implemented. Added: it answers with a real AWS event
   stream (binary framing, CRCs) whose PayloadParts are the chunks queued with `queue_stream`, so
   botocore's own event-stream decoder runs in the test.
"""

from __future__ import annotations

import binascii
import logging
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session
from moto.core.responses import ActionResult, EmptyResult
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sagemaker import models as sm_models
from moto.sagemaker import responses as sm_responses
from moto.sagemaker.exceptions import ValidationError
from moto.sagemakerruntime import responses as rt_responses
from moto.sagemakerruntime import urls as rt_urls

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-never-printed",
    "AWS_SESSION_TOKEN": "testing-token",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}

_BOTOCORE_INSTANCE_TYPES = frozenset(
    botocore.session.get_session().get_service_model("sagemaker").shape_for("ProductionVariantInstanceType").enum
)
_STREAMS: list[list[bytes]] = []
_STREAMS_LOCK = threading.Lock()


def queue_stream(chunks: list[bytes]) -> None:
    """The PayloadPart chunks the next InvokeEndpointWithResponseStream answers with."""
    with _STREAMS_LOCK:
        _STREAMS.append(list(chunks))


# --- gap 1: instance types ---------------------------------------------------------------------
def _validate_instance_type(self: Any, instance_type: str) -> None:
    if instance_type not in _BOTOCORE_INSTANCE_TYPES:
        raise ValidationError(
            message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
            "Member must satisfy enum value set (botocore ProductionVariantInstanceType)"
        )


# --- gap 2: UpdateEndpoint ---------------------------------------------------------------------
def _update_endpoint(self: Any) -> ActionResult:
    name = self._get_param("EndpointName")
    config_name = self._get_param("EndpointConfigName")
    backend = self.sagemaker_backend
    if name not in backend.endpoints:
        arn = sm_models.FakeEndpoint.arn_formatter(name, backend.account_id, backend.region_name)
        raise ValidationError(message=f"Could not find endpoint '{arn}'.")
    config = backend.describe_endpoint_config(config_name)  # raises "Could not find" when missing
    endpoint = backend.endpoints[name]
    endpoint.endpoint_config_name = config_name
    endpoint.production_variants = endpoint._process_production_variants(config["ProductionVariants"])
    endpoint.last_modified_time = sm_models.utcnow()
    UPDATES.append(
        {"EndpointName": name, **{k: self._get_param(k) for k in ("EndpointConfigName", "DeploymentConfig")}}
    )
    return ActionResult({"EndpointArn": endpoint.arn})


UPDATES: list[dict[str, Any]] = []  # UpdateEndpoint requests as the server received them


# --- gap 3: InvokeEndpointWithResponseStream ---------------------------------------------------
def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value)) + raw_value


def event_message(event_type: str, payload: bytes) -> bytes:
    """One AWS event-stream message (prelude, prelude CRC, string headers, payload, message CRC)."""
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/octet-stream")
        + _header(":message-type", "event")
    )
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def _invoke_stream(self: Any) -> tuple[int, dict[str, str], bytes]:
    with _STREAMS_LOCK:
        chunks = _STREAMS.pop(0) if _STREAMS else [b'{"generated_text": ""}\n']
    body = b"".join(event_message("PayloadPart", chunk) for chunk in chunks)
    headers = {
        "Content-Type": "application/vnd.amazon.eventstream",
        "X-Amzn-SageMaker-Content-Type": "application/jsonlines",
    }
    return 200, headers, body


_original_infer = DomainDispatcherApplication.infer_service_region_host


def _infer_service_region_host(self: Any, environ: dict[str, Any], path: str) -> str | None:
    # moto routes only paths ending in "invocations" to the runtime backend; the streaming
    # operation's path ends in "invocations-response-stream".
    if path.endswith("/invocations-response-stream"):
        return "runtime.sagemaker.us-east-1.amazonaws.com"
    return _original_infer(self, environ, path)


_PATCHED = False


def _patch_moto() -> None:
    global _PATCHED
    if _PATCHED:
        return
    sm_models.FakeEndpointConfig.validate_instance_type = _validate_instance_type
    sm_responses.SageMakerResponse.update_endpoint = _update_endpoint
    rt_responses.SageMakerRuntimeResponse.invoke_endpoint_with_response_stream = _invoke_stream
    DomainDispatcherApplication.infer_service_region_host = _infer_service_region_host
    rt_urls.url_paths["{0}/endpoints/(?P<name>[^/]+)/invocations-response-stream$"] = rt_urls.response.dispatch
    _PATCHED = True


@contextmanager
def moto_server() -> Iterator[str]:
    """Start the patched moto server; yields its URL (for AWS_ENDPOINT_URL)."""
    _patch_moto()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    # Port 0: the server binds a free port itself (a port picked, released and bound again can be taken in between).
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


__all__ = ["FAKE_CREDENTIALS", "UPDATES", "EmptyResult", "event_message", "moto_server", "queue_stream"]
