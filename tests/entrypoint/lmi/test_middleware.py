"""LMIMiddleware's ASGI mechanics on a real Starlette app that answers the way vLLM does.

The real vLLM server is exercised in tests/e2e; here the downstream app can be made to fail on
cue (an error before the stream, an exception mid-stream, an engine that stops), which the real
engine cannot do on demand.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pydantic
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest

from entrypoint.lmi import lifecycle, middleware
from entrypoint.lmi.lifecycle import ENGINE_DIED_EXIT_CODE
from entrypoint.lmi.middleware import LMIMiddleware
from tests.entrypoint.lmi.test_stream import chunk, sse  # vLLM-shaped SSE events, as in the stream tests


class FakeEngine:
    """What the middleware reads of vLLM's EngineClient: `errored`."""

    def __init__(self) -> None:
        self.errored = False


ROUTING_REFUSAL = (
    "Cannot find suitable handler for request. Expected one of: ['ChatCompletionRequest', 'CompletionRequest']"
)


def vllm_400(message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}, 400)


def vllm_router(body: Any) -> tuple[str | None, Response | None]:
    """vLLM 0.32's /invocations routing (vllm/entrypoints/serve/sagemaker/api_router.py): the first of its request
    models that validates the body picks the handler; none does → a 400 that names no field; a model's own
    validator raising something else (VLLMValidationError, TypeError) → a 400 with that message."""
    for handler, model in (("chat", ChatCompletionRequest), ("completion", CompletionRequest)):
        try:
            model.model_validate(body)
        except pydantic.ValidationError:
            continue
        except Exception as exc:
            return None, vllm_400(str(exc))
        return handler, None
    return None, vllm_400(ROUTING_REFUSAL)


async def invocations(request: Request) -> Response:
    """vLLM's /invocations as far as the middleware can tell; the prompt picks the behaviour."""
    body = await request.json()
    handler, refusal = vllm_router(body)
    seen = {
        "body": body,
        "content_type": request.headers.get("content-type"),
        "custom_attributes": getattr(request.state, "custom_attributes", None),
        "handler": handler,
    }
    request.app.state.last_seen = seen
    if refusal is not None:
        return refusal
    prompt = body.get("prompt") or (body.get("messages") or [{}])[0].get("content")
    engine: FakeEngine = request.app.state.engine_client

    async def stream(kind: str) -> AsyncIterator[bytes]:
        yield sse(chunk(" a", [1]))
        if kind == "raise":
            raise RuntimeError("engine blew up")
        if kind == "hang":
            engine.errored = True  # the engine stops while this request waits for tokens
            await asyncio.sleep(3600)
        yield sse(chunk(" b", [2], "length"))
        yield sse("[DONE]")

    if prompt == "error-before":
        return JSONResponse({"error": {"message": "max_tokens too large", "code": 400}}, status_code=400)
    if prompt == "raise-unary":
        raise RuntimeError("engine blew up")
    if prompt == "hang-unary":
        engine.errored = True
        await asyncio.sleep(3600)
    if body.get("stream"):
        return StreamingResponse(stream(prompt), media_type="text/event-stream")
    if prompt == "answer":
        return JSONResponse(
            {
                "choices": [
                    {
                        "index": 0,
                        "text": " a b",
                        "token_ids": [1, 2],
                        "finish_reason": "length",
                        "stop_reason": None,
                        "logprobs": {"tokens": [" a", " b"], "token_logprobs": [-0.1, -0.2]},
                    }
                ]
            }
        )
    return JSONResponse({"seen": seen})


async def other(request: Request) -> Response:
    return Response(await request.body() or b"untouched", media_type="text/plain")


def make_app() -> Starlette:
    app = Starlette(
        routes=[
            Route("/invocations", invocations, methods=["POST"]),
            Route("/v1/completions", other, methods=["POST"]),
            Route("/invocations", other, methods=["GET"]),
        ]
    )
    app.state.engine_client = FakeEngine()
    app.add_middleware(LMIMiddleware)
    return app


@pytest.fixture
def client() -> Iterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=make_app(), raise_app_exceptions=False)
    yield httpx.AsyncClient(transport=transport, base_url="http://test", timeout=10)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def test_other_paths_and_methods_are_not_touched(client: httpx.AsyncClient) -> None:
    async def go() -> tuple[httpx.Response, httpx.Response]:
        return (await client.post("/v1/completions", content=b"{not json"), await client.get("/invocations"))

    post, get = run(go())
    assert post.text == "{not json" and get.text == "untouched"


def test_lmi_body_reaches_vllm_as_a_json_completion_request() -> None:
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    headers = {"Content-Type": "application/octet-stream", "X-Amzn-SageMaker-Custom-Attributes": "a=1;b=2"}
    body = b'{"inputs": "answer", "parameters": {"max_new_tokens": 5}}'
    assert run(client.post("/invocations", content=body, headers=headers)).status_code == 200
    seen = app.state.last_seen
    assert seen["body"] == {"prompt": "answer", "max_tokens": 5, "temperature": 0.0}
    assert seen["content_type"] == "application/json"  # vLLM refuses other content types
    assert seen["custom_attributes"] == {"a": "1", "b": "2"}


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "unary"])
def test_an_lmi_parameter_vllm_would_ignore_is_refused_before_vllm(stream: bool) -> None:
    """vLLM's CompletionRequest (the real one) takes unknown fields and ignores them: the typo is caught here."""
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    body = {"inputs": "answer", "stream": stream, "parameters": {"max_new_token": 5}}
    CompletionRequest.model_validate({"prompt": "answer", "max_new_token": 5})  # vLLM itself would take it
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 400, response.text
    assert "parameters.max_new_token=5: not a parameter (did you mean max_new_tokens?)" in response.json()["error"]
    assert not hasattr(app.state, "last_seen")
    body["parameters"] = {"min_tokens": 2, "watermark": False}  # vLLM's name passes; TGI's neutral one is dropped
    assert run(client.post("/invocations", json={**body, "stream": False})).status_code == 200
    assert app.state.last_seen["body"] == {"min_tokens": 2, "prompt": "answer", "max_tokens": 30, "temperature": 0.0}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"inputs": "answer", "parameter": {"max_new_tokens": 500}},
                     "parameter={'max_new_tokens': 500}: not a top-level key of an LMI body (did you mean parameters?)",
                     id="a typo of parameters"),
        pytest.param({"inputs": "answer", "max_new_tokens": 500, "temperature": 0.9},
                     'max_new_tokens=500: not a top-level key of an LMI body; max_new_tokens is a parameter: send it '
                     'inside "parameters"', id="parameters beside inputs"),
        pytest.param({"inputs": "answer", "stream": True, "parameters": {"decoder_input_details": True}},
                     'parameters.decoder_input_details=True: expected false or null when "stream" is true',
                     id="decoder_input_details in a stream"),
    ],
)  # fmt: skip
def test_what_the_translation_would_drop_is_refused_before_vllm(body: dict[str, Any], message: str) -> None:
    """Both ran with defaults before (30 tokens, greedy; no prefill), and a stream answered 200: now an HTTP 400."""
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 400, response.text
    assert response.json() == {"code": 400, "error": response.json()["error"]}
    assert response.json()["error"].startswith(f"Input parsing failed: {message}")
    assert not hasattr(app.state, "last_seen")


# TGI's Python client (text_generation.Client.generate) sends every field of its Parameters model, unset ones as null,
# and always details=true. (It reads the answer as a list and its stream as SSE, unlike LMI's: option.tgi_compat gives
# those, test_tgi_compat.py; huggingface_hub's InferenceClient strips the nulls and reads LMI's unary answers.)
TGI_CLIENT_PARAMETERS = {
    "do_sample": False, "max_new_tokens": 20, "repetition_penalty": None, "frequency_penalty": None,
    "return_full_text": False, "stop": [], "seed": None, "temperature": None, "top_k": None, "top_p": None,
    "truncate": None, "typical_p": None, "best_of": None, "watermark": False, "details": True,
    "decoder_input_details": False, "top_n_tokens": None, "grammar": None, "adapter_id": None,
}  # fmt: skip


def test_the_tgi_clients_full_parameter_set_is_accepted() -> None:
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    body = {"inputs": "answer", "parameters": TGI_CLIENT_PARAMETERS, "stream": False}
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 200, response.text
    seen = app.state.last_seen
    assert seen["handler"] == "completion"  # vLLM's real CompletionRequest took what was forwarded
    assert seen["body"] == {"prompt": "answer", "max_tokens": 20, "temperature": 0.0, "logprobs": 0,
                            "return_token_ids": True}  # fmt: skip


def test_openai_bodies_pass_through_unchanged() -> None:
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    body = {"prompt": "echo", "max_tokens": 3, "anything": [1, {"x": None}]}
    answer = run(client.post("/invocations", json=body)).json()
    assert answer["seen"]["body"] == body


def test_unary_answer_is_translated(client: httpx.AsyncClient) -> None:
    body = {"inputs": "answer", "parameters": {"details": True}}
    answer = run(client.post("/invocations", json=body)).json()
    assert answer["generated_text"] == " a b"
    assert answer["details"]["tokens"] == [
        {"id": 1, "text": " a", "log_prob": -0.1},
        {"id": 2, "text": " b", "log_prob": -0.2},
    ]
    assert answer["details"]["inputs"] == "answer"  # LMI's details repeat the input


@pytest.mark.parametrize("stream", [True, False], ids=["before a stream", "unary"])
def test_vllm_error_is_an_lmi_json_error_in_lmi_names(client: httpx.AsyncClient, stream: bool) -> None:
    response = run(client.post("/invocations", json={"inputs": "error-before", "stream": stream}))
    assert response.status_code == 400
    # vLLM said max_tokens; the client sent parameters.max_new_tokens
    assert response.json() == {"code": 400, "error": "Input parsing failed: parameters.max_new_tokens too large"}


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "unary"])
@pytest.mark.parametrize(
    ("params", "message"),
    [
        pytest.param(
            {"min_tokens": "x"}, "parameters.min_tokens='x': expected a valid integer", id="pass-through field type"
        ),
        pytest.param({"user": {}}, "parameters.user={}: expected a valid string", id="pass-through object"),
        pytest.param(
            {"logit_bias": {"7": "x"}}, "parameters.logit_bias[\"7\"]='x': expected a valid number", id="nested"
        ),
    ],
)
def test_a_field_vllm_routing_refuses_is_named_for_lmi_bodies(
    client: httpx.AsyncClient, params: dict[str, Any], message: str, stream: bool
) -> None:
    body = {"inputs": "hi", "stream": stream, "parameters": params}
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"Input parsing failed: {message}"), response.text
    assert ROUTING_REFUSAL not in response.text


def test_messages_in_lmi_parameters_never_reach_the_chat_handler() -> None:
    app = make_app()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    body = {"inputs": ["hi", "yo"], "parameters": {"max_new_tokens": 4, "messages": [{"role": "user", "content": "x"}]}}
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 400 and "parameters.messages" in response.json()["error"]
    assert not hasattr(app.state, "last_seen")  # refused here: vLLM would have answered one chat reply for two inputs


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        pytest.param({"prompt": 5}, "prompt", "prompt=5: expected a valid list or a valid string", id="prompt type"),
        pytest.param(
            {"prompt": [-1]}, "prompt[0]", "prompt[0]=-1: expected a value greater than or equal to 0", id="id"
        ),
        pytest.param(
            {"prompt": "hi", "max_tokens": "x"}, "max_tokens", "max_tokens='x': expected a valid integer", id="max"
        ),
        pytest.param({"messages": None}, "messages", "messages=None: expected a list of message objects", id="null"),
        pytest.param({"messages": "hi"}, "messages", "messages='hi': expected a list", id="messages string"),
        pytest.param(
            {"messages": [{"content": "hi"}]}, "messages[0].role", "messages[0].role is missing", id="no role"
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": 5}]},
            "messages[0].content",
            "messages[0].content=5: expected a valid string",
            id="content type",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "hi"}], "tools": "x"},
            "tools",
            "tools='x': expected a valid list",
            id="tools",
        ),
    ],
)
def test_openai_bodies_vllm_cannot_route_get_a_400_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], param: str, message: str
) -> None:
    response = run(client.post("/invocations", json=body))
    assert response.status_code == 400
    error = response.json()["error"]  # still vLLM's OpenAI error shape
    assert error["param"] == param and error["type"] == "BadRequestError" and error["code"] == 400
    assert error["message"].startswith(message), error["message"]


def test_an_openai_400_validation_cannot_explain_is_vllms_own(client: httpx.AsyncClient) -> None:
    response = run(client.post("/invocations", json={"prompt": "error-before"}))
    assert response.status_code == 400
    assert response.json() == {"error": {"message": "max_tokens too large", "code": 400}}


def test_stream_is_jsonlines_and_ends_with_the_full_text(client: httpx.AsyncClient) -> None:
    response = run(client.post("/invocations", json={"inputs": "fine", "stream": True}))
    assert response.headers["content-type"] == "application/jsonlines"
    got = lines(response)
    assert [line["token"]["id"] for line in got] == [1, 2]
    assert got[-1]["generated_text"] == " a b"


def test_exception_mid_stream_becomes_a_final_error_line(client: httpx.AsyncClient) -> None:
    response = run(client.post("/invocations", json={"inputs": "raise", "stream": True}))
    assert response.status_code == 200
    got = lines(response)
    assert got[0]["token"]["id"] == 1
    assert got[-1] == {"code": 500, "error": "inference failed: RuntimeError"}


def test_exception_in_a_unary_request_is_an_lmi_500(client: httpx.AsyncClient) -> None:
    response = run(client.post("/invocations", json={"inputs": "raise-unary"}))
    assert response.status_code == 500 and response.json() == {"code": 500, "error": "inference failed: RuntimeError"}


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "unary"])
def test_engine_stop_ends_an_open_lmi_request_within_a_second(client: httpx.AsyncClient, stream: bool) -> None:
    async def go() -> httpx.Response:
        prompt = "hang" if stream else "hang-unary"
        return await asyncio.wait_for(client.post("/invocations", json={"inputs": prompt, "stream": stream}), 2)

    response = run(go())
    if stream:
        got = lines(response)
        assert got[0]["token"]["id"] == 1 and got[-1]["code"] == 503
    else:
        assert response.status_code == 503 and "engine stopped" in response.json()["error"]


def test_engine_stop_before_a_stream_starts_is_an_http_503(client: httpx.AsyncClient) -> None:
    # "hang-unary" stops the engine before vLLM's handler returns its StreamingResponse
    response = run(asyncio.wait_for(client.post("/invocations", json={"inputs": "hang-unary", "stream": True}), 2))
    assert response.status_code == 503
    assert response.json() == {"code": 503, "error": middleware.ENGINE_STOPPED.message}


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000 + b"]" * 100_000, b'{"inputs": "x", "parameters": {"max_new_tokens": ' + b"9" * 5000 + b"}}"],
    ids=["deep nesting", "5000-digit integer"],
)
def test_bodies_json_cannot_decode_are_a_400_not_a_500(client: httpx.AsyncClient, raw: bytes) -> None:
    response = run(client.post("/invocations", content=raw))
    assert response.status_code == 400 and response.json()["code"] == 400
    assert response.json()["error"].startswith("Input parsing failed: body")


def test_engine_stop_ends_an_openai_stream_with_an_sse_error(client: httpx.AsyncClient) -> None:
    body = {"messages": [{"role": "user", "content": "hang"}], "stream": True}
    response = run(asyncio.wait_for(client.post("/invocations", json=body), 2))
    assert response.text.endswith("data: [DONE]\n\n")
    assert '"code": 503' in response.text.split("data: ")[-2]


def test_payload_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_MAX_PAYLOAD_IN_MB", "0.001")  # about 1 KB
    transport = httpx.ASGITransport(app=make_app())
    client = httpx.AsyncClient(transport=transport, base_url="http://test")
    raw = json.dumps({"inputs": "x" * 2000}).encode()
    big = run(client.post("/invocations", content=raw))
    small = run(client.post("/invocations", json={"inputs": "answer"}))
    assert big.status_code == 413 and big.json()["code"] == 413
    # the limit as configured and in bytes (int(0.001 * 2**20)), and the body's size from its Content-Length
    expected = f"request body of {len(raw)} bytes is over SAGEMAKER_MAX_PAYLOAD_IN_MB=0.001 MB (1048 bytes)"
    assert big.json()["error"] == expected
    assert small.status_code == 200


def test_payload_limit_without_a_content_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_MAX_PAYLOAD_IN_MB", "0.001")
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=make_app()), base_url="http://test")

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the size is what was read when it stopped
        for _ in range(4):
            yield b"x" * 600

    big = run(client.post("/invocations", content=chunked()))
    assert big.status_code == 413
    assert (
        big.json()["error"]
        == "request body of at least 1200 bytes is over SAGEMAKER_MAX_PAYLOAD_IN_MB=0.001 MB (1048 bytes)"
    )


# ---------------------------------------------------------------------------------------------
# Exit status after the server stops


async def lifespan_cycle(app: Starlette, engine_errored: bool, before_shutdown: Any = None) -> None:
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        message = next(messages)
        if message["type"] == "lifespan.shutdown":
            app.state.engine_client.errored = engine_errored
            if before_shutdown:
                before_shutdown()
        return message

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(lifecycle, "SERVER_STATE", lifecycle.ServerState())
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_engine_death_makes_the_exit_status_non_zero(fresh_state: None) -> None:
    run(lifespan_cycle(make_app(), engine_errored=True))
    assert lifecycle.exit_code() == ENGINE_DIED_EXIT_CODE


def test_a_clean_stop_exits_zero(fresh_state: None) -> None:
    run(lifespan_cycle(make_app(), engine_errored=False))
    assert lifecycle.exit_code() == 0


def test_sigterm_then_engine_stop_exits_zero(fresh_state: None) -> None:
    seen: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))  # stands in for asyncio's
    app = make_app()
    run(lifespan_cycle(app, engine_errored=True, before_shutdown=lambda: signal.raise_signal(signal.SIGTERM)))
    assert lifecycle.exit_code() == 0
    assert seen == [signal.SIGTERM], "the previous SIGTERM handler must still be called"
