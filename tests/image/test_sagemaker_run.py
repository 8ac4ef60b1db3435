"""The container as SageMaker runs it: `docker run IMAGE serve`, root, the model read-only at /opt/ml/model, the
port from SAGEMAKER_BIND_TO_PORT, settings from OPTION_* and from a serving.properties beside the weights, secrets
in the environment. One container for the module; the last test stops it with `docker stop` and 8 streams open.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.image.conftest import readable_copy, running
from tests.image.container import DOCKER, Container, docker
from tools.local_server import is_final_or_error, open_lmi_streams

# Values that look like the real thing; none may reach `docker logs`.
SECRETS = {
    "HF_TOKEN": "hf_imagetestSECRETvalue0123456789abc",
    "AWS_ACCESS_KEY_ID": "AKIAIMAGETESTSECRET7",
    "AWS_SECRET_ACCESS_KEY": "imagetest/Secret+Access/Key0123456789abcdEF",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjImagetestSessionTokenSECRET",
    "OPTION_HF_TOKEN": "hf_imagetestOptionTokenSECRET987654321",
}
# The file beside the weights sets the context; the environment sets the batch size and a context the file
# overrides: the file wins where both speak (LMI's precedence), the environment counts where the file is silent.
FILE_MAX_MODEL_LEN = 448
ENV_MAX_MODEL_LEN = 300
ENV_MAX_NUM_SEQS = 6
CUSTOM_ATTRIBUTES = {"X-Amzn-SageMaker-Custom-Attributes": "trace_id=image-test;priority=1"}
SAGEMAKER_STOP_GRACE_S = 30.0


@dataclass
class Started:
    container: Container
    ready_s: float  # from `docker run` to the first /ping 200
    first_invocation: httpx.Response  # sent right after that /ping


@pytest.fixture(scope="module")
def started(tiny_model: Path, model_root: Path) -> Iterator[Started]:
    model = readable_copy(tiny_model, model_root / "sagemaker", f"option.max_model_len={FILE_MAX_MODEL_LEN}\n")
    env = {
        **SECRETS,
        "OPTION_MAX_MODEL_LEN": str(ENV_MAX_MODEL_LEN),
        "OPTION_MAX_ROLLING_BATCH_SIZE": str(ENV_MAX_NUM_SEQS),
    }
    container = Container(name="moe-image-test-sagemaker", env=env, model=model)
    with running(container):
        ready_s = container.wait_ready()
        # The very first request after the first /ping 200: the engine must already be up.
        first = httpx.post(
            container.url + "/invocations", json={"inputs": "first", "parameters": {"max_new_tokens": 4}}, timeout=60
        )
        print(f"container start to first /ping 200: {ready_s:.1f} s")
        yield Started(container, ready_s, first)


@pytest.fixture
def sagemaker(started: Started) -> Container:
    return started.container


@pytest.fixture
def client(sagemaker: Container) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sagemaker.url, timeout=60, headers=CUSTOM_ATTRIBUTES) as c:
        yield c


def test_ping_is_200_only_once_the_engine_serves(started: Started) -> None:
    pings = started.container.pings
    before = pings[:-1]
    assert pings[-1].status == 200
    # Before the engine is up nothing listens (vLLM binds after the engine started) or /ping says 503.
    assert all(p.status in (None, 503) for p in before), [p for p in before if p.status not in (None, 503)]
    first = started.first_invocation
    assert first.status_code == 200 and isinstance(first.json()["generated_text"], str), first.text


def test_docker_health_turns_healthy_through_the_image_healthcheck(sagemaker: Container) -> None:
    # The image's HEALTHCHECK probes every 30 s, on the port SAGEMAKER_BIND_TO_PORT moved the server to.
    deadline = time.monotonic() + 75
    while sagemaker.health() != "healthy" and time.monotonic() < deadline:
        assert sagemaker.health() in ("starting", "healthy"), sagemaker.health()
        time.sleep(1)
    assert sagemaker.health() == "healthy"


def test_sagemaker_bind_to_port_is_where_it_listens(sagemaker: Container) -> None:
    assert sagemaker.port != 8080
    assert httpx.get(sagemaker.url + "/ping", timeout=5).status_code == 200
    assert f"--port {sagemaker.port}" in sagemaker.logs()


def test_serving_properties_beside_the_weights_wins_over_option_env(client: httpx.Client, sagemaker: Container) -> None:
    models = client.get("/v1/models").json()["data"]
    assert [m["max_model_len"] for m in models] == [FILE_MAX_MODEL_LEN]
    logs = sagemaker.logs()
    assert "serving.properties: /opt/ml/model/serving.properties (model directory)" in logs
    assert "option.max_model_len from file:/opt/ml/model/serving.properties (over env:OPTION_MAX_MODEL_LEN)" in logs


def test_option_env_counts_where_the_file_is_silent(sagemaker: Container) -> None:
    exec_line = next(line for line in sagemaker.logs().splitlines() if "exec: vllm serve" in line)
    assert f"--max-num-seqs {ENV_MAX_NUM_SEQS}" in exec_line, exec_line


# ------------------------------------------------------------------------------------ requests on /invocations

CONTENT_TYPES = ["application/json", "application/octet-stream", "application/json; charset=utf-8"]


def post_raw(client: httpx.Client, body: dict[str, Any], content_type: str, **headers: str) -> httpx.Response:
    return client.post(
        "/invocations", content=json.dumps(body).encode(), headers={"Content-Type": content_type, **headers}
    )


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_lmi_body_with_details(client: httpx.Client, content_type: str) -> None:
    body = {"inputs": "What is a mixture of experts?", "parameters": {"max_new_tokens": 8, "details": True,
                                                                     "ignore_eos_token": True}}  # fmt: skip
    response = post_raw(client, body, content_type)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert isinstance(answer["generated_text"], str)
    details = answer["details"]
    assert details["finish_reason"] == "length" and details["generated_tokens"] == 8 == len(details["tokens"])
    assert all(isinstance(t["id"], int) and t["log_prob"] <= 0 for t in details["tokens"])


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_lmi_jsonlines_stream(client: httpx.Client, content_type: str) -> None:
    body = {"inputs": "Tell me a story", "parameters": {"max_new_tokens": 10, "ignore_eos_token": True},
            "stream": True}  # fmt: skip
    headers = {"Content-Type": content_type, "Accept": "application/jsonlines"}
    with client.stream("POST", "/invocations", content=json.dumps(body).encode(), headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/jsonlines")
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert len(lines) == 10 and all("token" in line for line in lines)
    assert lines[-1]["generated_text"] == "".join(line["token"]["text"] for line in lines)
    assert all(line["generated_text"] is None for line in lines[:-1])


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_openai_chat_and_completions(client: httpx.Client, content_type: str) -> None:
    chat = post_raw(client, {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 6}, content_type)
    assert chat.status_code == 200, chat.text
    assert chat.json()["object"] == "chat.completion" and chat.json()["usage"]["completion_tokens"] <= 6
    completion = post_raw(client, {"prompt": "Hello", "max_tokens": 6}, content_type)
    assert completion.status_code == 200, completion.text
    assert completion.json()["object"] == "text_completion"


def test_openai_chat_stream_ends_with_done(client: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True}
    with client.stream("POST", "/invocations", content=json.dumps(body).encode(),
                       headers={"Content-Type": "application/octet-stream"}) as response:  # fmt: skip
        assert response.status_code == 200
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert all(json.loads(e[len("data: ") :])["object"] == "chat.completion.chunk" for e in events[:-1])


def test_a_client_mistake_is_a_4xx_in_lmi_shape(client: httpx.Client) -> None:
    response = post_raw(client, {"inputs": "x", "parameters": {"top_p": "x"}}, "application/octet-stream")
    assert response.status_code == 400
    assert response.json()["code"] == 400 and "parameters.top_p" in response.json()["error"]


@pytest.mark.parametrize("attributes", ["", "no-equals-sign;;=;" + "k=v;" * 300, "accept_eula=true"])
def test_custom_attributes_header_never_refuses(client: httpx.Client, attributes: str) -> None:
    response = client.post("/invocations", json={"inputs": "x", "parameters": {"max_new_tokens": 2}},
                           headers={"X-Amzn-SageMaker-Custom-Attributes": attributes})  # fmt: skip
    assert response.status_code == 200, response.text


def test_secrets_in_the_environment_appear_nowhere_in_docker_logs(sagemaker: Container) -> None:
    # The container did get them (so their absence from the logs means something) ...
    env = docker("inspect", "-f", "{{json .Config.Env}}", sagemaker.name).stdout
    assert all(value in env for value in SECRETS.values())
    # ... and after a start and every kind of request, none of them was logged.
    logs = sagemaker.logs()
    leaked = [name for name, value in SECRETS.items() if value in logs]
    assert not leaked, f"{leaked} leaked into docker logs"
    # the plan's command line is shell-quoted: the placeholder too
    assert re.search(r"HF_TOKEN='\*\*\*'", logs), "option.hf_token reaches vLLM as HF_TOKEN, shown as ***"
    # never on the command line, which any user of the host reads (the reason line names the flag it replaces)
    assert not re.search(r"--hf-token[ =]'?\*", logs)


# ------------------------------------------------------------------------------------ docker stop (last)


def test_docker_stop_with_8_open_streams_answers_every_client_and_exits_in_time(sagemaker: Container) -> None:
    async def scenario() -> tuple[list[tuple[list[dict[str, Any]], str | None]], float, int]:
        started = asyncio.Event()
        streams = asyncio.ensure_future(
            open_lmi_streams(sagemaker.url, 8, started, max_new_tokens=400, timeout_s=SAGEMAKER_STOP_GRACE_S + 10,
                             headers=CUSTOM_ATTRIBUTES)
        )  # fmt: skip
        await asyncio.wait_for(started.wait(), timeout=60)
        signalled = time.monotonic()
        # docker stop sends SIGTERM, then SIGKILL after -t seconds: SageMaker's 30 s.
        stop = await asyncio.create_subprocess_exec(
            DOCKER, "stop", "-t", str(int(SAGEMAKER_STOP_GRACE_S)), sagemaker.name, stdout=asyncio.subprocess.DEVNULL
        )
        results = await streams
        await stop.wait()
        return results, time.monotonic() - signalled, stop.returncode or 0

    results, stop_s, stop_rc = asyncio.run(scenario())
    print(f"docker stop with 8 open streams: {stop_s:.1f} s")
    assert stop_rc == 0 and not sagemaker.running()
    assert stop_s < SAGEMAKER_STOP_GRACE_S, f"docker stop took {stop_s:.1f} s"
    assert sagemaker.exit_code() == 0, "a SIGTERM stop is a clean exit (137 would mean docker had to SIGKILL it)"
    unfinished = 0
    for lines, transport_error in results:
        assert transport_error is None, f"stream cut without a final line: {transport_error}"
        assert lines, "a stream got nothing at all"
        last = lines[-1]
        assert is_final_or_error(last), last
        assert all("token" in line for line in lines[:-1])
        unfinished += set(last) == {"code", "error"}
    print(f"{unfinished} of 8 streams ended with a final error line, the rest complete")
