"""Every request shape LMI's integration client sends, against the real server on the tiny MoE.

The tiny model's text is noise: tests check structure, token counts, finish reasons and greedy
determinism, never wording.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.entrypoint.lmi.test_middleware import TGI_CLIENT_PARAMETERS
from tools.local_server import Server

JSONLINES = "application/jsonlines"


def invoke(client: httpx.Client, body: Any, **kwargs: Any) -> httpx.Response:
    return client.post("/invocations", json=body, **kwargs)


def stream_lines(client: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    with client.stream("POST", "/invocations", json=body) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    return response, lines


def assert_token(token: dict[str, Any], with_logprob: bool) -> None:
    assert isinstance(token["id"], int) and 0 <= token["id"] < 512
    assert isinstance(token["text"], str)
    if with_logprob:
        assert isinstance(token["log_prob"], float) and token["log_prob"] <= 0.0


# ------------------------------------------------------------------------------------ health


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_ping_answers_200(client: httpx.Client, method: str) -> None:
    assert client.request(method, "/ping").status_code == 200


# ------------------------------------------------------------------------------------ TGI schema


def test_tgi_schema_without_details_returns_only_generated_text(client: httpx.Client) -> None:
    response = invoke(client, {"inputs": "What is a mixture of experts?", "parameters": {"max_new_tokens": 8}})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["generated_text"] and body["generated_text"]


def test_tgi_schema_with_details_counts_tokens_and_says_length(client: httpx.Client) -> None:
    body = {"inputs": "Hello", "parameters": {"max_new_tokens": 12, "details": True, "ignore_eos_token": True}}
    answer = invoke(client, body).json()
    details = answer["details"]
    assert details["finish_reason"] == "length"
    assert details["generated_tokens"] == 12 == len(details["tokens"])
    assert details["inputs"] == "Hello"  # LMI's details repeat the input
    for token in details["tokens"]:
        assert_token(token, with_logprob=True)


def test_lmi_default_is_30_new_tokens(client: httpx.Client) -> None:
    details = invoke(client, {"inputs": "Hi", "parameters": {"details": True, "ignore_eos_token": True}}).json()
    assert details["details"]["generated_tokens"] == 30


def test_lmi_integration_client_payload_with_sampling(client: httpx.Client) -> None:
    # The exact shape of LMI's own integration tests: do_sample, max_new_tokens, details.
    body = {
        "inputs": "Tell me a story",
        "parameters": {
            "do_sample": True,
            "max_new_tokens": 10,
            "details": True,
            "seed": 7,
            "top_p": 0.9,
            "top_k": 20,
            "temperature": 0.8,
            "repetition_penalty": 1.1,
            "ignore_eos_token": True,
        },
    }
    first = invoke(client, body).json()
    assert first["details"]["generated_tokens"] == 10 and first["details"]["seed"] == 7
    assert invoke(client, body).json() == first  # a seed makes sampling repeatable


def test_greedy_is_deterministic_and_streaming_agrees(client: httpx.Client) -> None:
    body = {"inputs": "The quick brown fox", "parameters": {"max_new_tokens": 16, "details": True}}
    answers = [invoke(client, body).json() for _ in range(3)]
    assert answers[0] == answers[1] == answers[2]
    _, lines = stream_lines(client, {**body, "stream": True})
    assert lines[-1]["generated_text"] == answers[0]["generated_text"]
    assert [line["token"]["id"] for line in lines] == [t["id"] for t in answers[0]["details"]["tokens"]]


def test_stop_sequence_is_reported_as_stop_sequence(client: httpx.Client) -> None:
    greedy = invoke(client, {"inputs": "Hello world", "parameters": {"max_new_tokens": 20, "details": True}}).json()
    texts = [t["text"] for t in greedy["details"]["tokens"]]
    # A stop string the greedy text really contains, after the first token.
    stop = next(t for t in texts[1:] if t.strip() and "\ufffd" not in t)
    cut = invoke(
        client,
        {"inputs": "Hello world", "parameters": {"max_new_tokens": 20, "details": True, "stop_sequences": [stop]}},
    ).json()
    assert cut["details"]["finish_reason"] == "stop_sequence"
    assert stop not in cut["generated_text"]
    assert greedy["generated_text"].startswith(cut["generated_text"])


def test_stop_token_is_reported_as_eos_token(client: httpx.Client) -> None:
    greedy = invoke(client, {"inputs": "Hello world", "parameters": {"max_new_tokens": 5, "details": True}}).json()
    second = greedy["details"]["tokens"][1]["id"]
    # stop_token_ids is a vLLM sampling field: it passes through the translation by name.
    body = {"inputs": "Hello world", "parameters": {"max_new_tokens": 5, "details": True, "stop_token_ids": [second]}}
    stopped = invoke(client, body).json()
    assert stopped["details"]["finish_reason"] == "eos_token"
    assert stopped["details"]["generated_tokens"] <= 2


def test_return_full_text_prepends_the_prompt(client: httpx.Client) -> None:
    params = {"max_new_tokens": 6}
    plain = invoke(client, {"inputs": "Hello there", "parameters": params}).json()["generated_text"]
    full = invoke(client, {"inputs": "Hello there", "parameters": {**params, "return_full_text": True}}).json()
    assert full["generated_text"] == "Hello there" + plain
    _, lines = stream_lines(
        client, {"inputs": "Hello there", "parameters": {**params, "return_full_text": True}, "stream": True}
    )
    assert lines[-1]["generated_text"] == "Hello there" + plain
    # with details vLLM 0.32 drops an echoed prompt (it does when token ids are asked for): the prefix is ours
    detailed = invoke(client, {"inputs": "Hello there", "parameters": {**params, "return_full_text": True,
                                                                       "details": True}}).json()  # fmt: skip
    assert detailed["generated_text"] == "Hello there" + plain and len(detailed["details"]["tokens"]) == 6


def test_decoder_input_details_and_truncate(client: httpx.Client) -> None:
    body = {
        "inputs": "one two three four five six seven",
        "parameters": {"max_new_tokens": 2, "details": True, "decoder_input_details": True},
    }
    prefill = invoke(client, body).json()["details"]["prefill"]
    assert len(prefill) > 4 and prefill[0]["log_prob"] is None
    assert all(isinstance(p["log_prob"], float) for p in prefill[1:])
    body["parameters"]["truncate"] = 3
    assert len(invoke(client, body).json()["details"]["prefill"]) == 3


def test_a_list_of_inputs_returns_a_list(client: httpx.Client) -> None:
    answer = invoke(client, {"inputs": ["a", "b c", "d e f"], "parameters": {"max_new_tokens": 3}}).json()
    assert isinstance(answer, list) and len(answer) == 3
    single = invoke(client, {"inputs": "b c", "parameters": {"max_new_tokens": 3}}).json()
    assert answer[1] == single


def test_custom_attributes_header_is_accepted(client: httpx.Client) -> None:
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "accept_eula=true; trace=abc;odd"}
    body = {"inputs": "Hi", "parameters": {"max_new_tokens": 3}}
    response = invoke(client, body, headers=headers)
    assert response.status_code == 200 and response.json() == invoke(client, body).json()


# ------------------------------------------------------------------------------------ streaming


def test_streaming_is_jsonlines_with_a_final_line(client: httpx.Client) -> None:
    body = {"inputs": "Tell me", "parameters": {"max_new_tokens": 10, "ignore_eos_token": True}, "stream": True}
    response, lines = stream_lines(client, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == JSONLINES
    assert len(lines) == 10
    for index, line in enumerate(lines):
        assert line["index"] == index
        assert_token(line["token"], with_logprob=False)
    assert all(line["generated_text"] is None for line in lines[:-1])
    assert lines[-1]["generated_text"] == "".join(line["token"]["text"] for line in lines)
    assert lines[-1]["details"] is None


def test_streaming_with_details(client: httpx.Client) -> None:
    body = {
        "inputs": "Tell me",
        "parameters": {"max_new_tokens": 6, "details": True, "ignore_eos_token": True},
        "stream": True,
    }
    _, lines = stream_lines(client, body)
    for line in lines:
        assert_token(line["token"], with_logprob=True)
    details = lines[-1]["details"]
    assert details["finish_reason"] == "length" and details["generated_tokens"] == 6
    assert details["inputs"] == "Tell me"


# ------------------------------------------------------------------------------------ OpenAI bodies


def test_chat_with_logprobs_on_invocations_needs_no_model_name(client: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 5, "logprobs": True, "top_logprobs": 1}
    answer = invoke(client, body).json()
    assert answer["object"] == "chat.completion"
    assert len(answer["choices"][0]["logprobs"]["content"]) == answer["usage"]["completion_tokens"]


def test_chat_streaming_on_invocations_stays_openai_sse(client: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4, "stream": True}
    with client.stream("POST", "/invocations", json=body) as response:
        text = response.read().decode()
    assert response.headers["content-type"].startswith("text/event-stream")
    assert text.rstrip().endswith("data: [DONE]")


def test_completions_on_invocations_is_passed_through(client: httpx.Client) -> None:
    answer = invoke(client, {"prompt": "Hello", "max_tokens": 4}).json()
    assert answer["object"] == "text_completion" and answer["usage"]["completion_tokens"] == 4


def test_the_tgi_python_clients_body_is_answered(client: httpx.Client) -> None:
    """Every field of TGI's client parameter model, unset ones null: greedy, 20 tokens (its max_new_tokens; the EOS
    ignored so that the tiny model cannot stop early)."""
    body = {"inputs": "Hello", "parameters": {**TGI_CLIENT_PARAMETERS, "ignore_eos_token": True}}
    response = invoke(client, body)
    assert response.status_code == 200, response.text
    assert response.json()["details"]["generated_tokens"] == 20


def test_huggingface_hubs_text_generation_client_reads_the_answer(server: Server) -> None:
    """The real huggingface_hub client, pointed at /invocations: it strips unset fields, sends TGI's names
    (watermark=false, stop=[]) and parses the LMI answer with details. (Its stream expects SSE, not LMI's jsonlines:
    option.tgi_compat gives SSE, tests/e2e/test_tgi_compat.py.)"""
    from huggingface_hub import InferenceClient

    hub = InferenceClient(model=server.url + "/invocations", timeout=60)
    out = hub.text_generation("Hello", max_new_tokens=5, details=True, stop=[], watermark=False)
    assert out.details is not None and out.details.generated_tokens == len(out.details.tokens) == 5
    assert out.generated_text == "".join(token.text for token in out.details.tokens)


def test_a_tgi_grammar_reaches_vllms_structured_outputs(client: httpx.Client) -> None:
    """TGI's regex grammar becomes vLLM's structured_outputs: the tiny model's random text is held to the regex."""
    grammar = {"type": "regex", "value": "[ab]{5}"}
    response = invoke(client, {"inputs": "Hello", "parameters": {"max_new_tokens": 12, "grammar": grammar}})
    assert response.status_code == 200, response.text
    text = response.json()["generated_text"]
    assert len(text) == 5 and set(text) <= {"a", "b"}, text


def test_completions_route_and_invocations_agree(client: httpx.Client) -> None:
    body = {"prompt": "Hello", "max_tokens": 6, "temperature": 0}
    direct = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    lmi = invoke(client, {"inputs": "Hello", "parameters": {"max_new_tokens": 6}}).json()["generated_text"]
    assert direct == lmi


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [
        pytest.param(b"", 400, "empty request body", id="empty body"),
        pytest.param(b"{not json", 400, "not valid JSON", id="non-JSON body"),
        pytest.param(b'{"text": "hi"}', 400, "must contain prompt, inputs, or messages", id="unknown schema"),
        pytest.param(b'{"inputs": 5}', 400, "inputs=5", id="inputs of the wrong type"),
        pytest.param(
            b'{"inputs": "a", "parameters": {"max_new_tokens": "ten"}}',
            400,
            "max_new_tokens='ten'",
            id="parameter of the wrong type",
        ),
        pytest.param(
            b'{"inputs": "a", "parameters": {"max_new_tokens": 100000}}',
            400,
            "max_model_len",
            id="more new tokens than the context",
        ),
        pytest.param(
            json.dumps({"inputs": "word " * 2000}).encode(),
            400,
            "Input parsing failed",
            id="prompt longer than the context",
        ),
        pytest.param(  # vLLM's router names no field ("Cannot find suitable handler"); the middleware does
            b'{"inputs": "a", "parameters": {"min_tokens": "x"}}',
            400,
            "parameters.min_tokens='x'",
            id="passed-through vLLM field of the wrong type",
        ),
        pytest.param(  # vLLM would ignore it and answer with the default 30 tokens
            b'{"inputs": "a", "parameters": {"max_new_token": 5}}',
            400,
            "parameters.max_new_token=5: not a parameter (did you mean max_new_tokens?)",
            id="a misspelt parameter",
        ),
        pytest.param(
            b'{"inputs": "a", "parameters": {"typical_p": 0.9}}',
            400,
            "parameters.typical_p=0.9: expected null (vLLM has no typical-p sampling)",
            id="a TGI parameter vLLM cannot apply",
        ),
        pytest.param(
            b'{"inputs": "a", "parameters": {"seed": 9223372036854775808}}',
            400,
            "parameters.seed",
            id="a seed beyond 64 bits",
        ),
        pytest.param(  # it used to reach vLLM's chat handler: one empty answer for two inputs, status 200
            b'{"inputs": ["hi", "yo"], "parameters": {"messages": [{"role": "user", "content": "x"}]}}',
            400,
            "parameters.messages",
            id="chat messages inside an LMI body",
        ),
        pytest.param(b'{"inputs": ""}', 400, "inputs", id="an empty input"),
        pytest.param(  # vLLM's own answer names a codec, not the field
            b'{"inputs": "a\\ud800b"}', 400, "inputs holds a lone UTF-16 surrogate \\ud800", id="a lone surrogate"
        ),
        pytest.param(
            b'{"inputs": "a", "stream": true, "parameters": {"max_new_tokens": 100000}}',
            400,
            "max_model_len",
            id="streaming request refused before the stream starts",
        ),
    ],
)
def test_client_errors_are_lmi_shaped_4xx(client: httpx.Client, content: bytes, status: int, message: str) -> None:
    response = client.post("/invocations", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "error"} and body["code"] == status
    assert message in body["error"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": "hi", "max_tokens": 4}, "messages"),
        ({"messages": [{"role": "user", "content": 5}], "max_tokens": 4}, "messages[0].content"),
        ({"prompt": "hi", "max_tokens": "x"}, "max_tokens"),
    ],
    ids=["messages not a list", "content not text", "max_tokens not a number"],
)
def test_openai_body_errors_name_the_field(client: httpx.Client, body: dict[str, Any], param: str) -> None:
    response = client.post("/invocations", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and param in error["message"]


def test_body_without_content_type_still_works(client: httpx.Client) -> None:
    # SageMaker clients often send application/octet-stream or nothing.
    content = b'{"inputs": "Hi", "parameters": {"max_new_tokens": 2}}'
    response = client.post("/invocations", content=content, headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 200 and "generated_text" in response.json()


# ------------------------------------------------------------------------------------ load


def test_64_concurrent_streams_all_complete(server: Server) -> None:
    async def one(client: httpx.AsyncClient, i: int) -> list[dict[str, Any]]:
        body = {
            "inputs": f"Request number {i}",
            "parameters": {"max_new_tokens": 16, "ignore_eos_token": True, "details": True},
            "stream": True,
        }
        async with client.stream("POST", "/invocations", json=body) as response:
            assert response.status_code == 200
            return [json.loads(line) async for line in response.aiter_lines() if line.strip()]

    async def run() -> list[list[dict[str, Any]]]:
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, i) for i in range(64)))

    results = asyncio.run(run())
    assert len(results) == 64
    for lines in results:
        assert len(lines) == 16
        final = lines[-1]
        assert final["details"]["generated_tokens"] == 16 and final["details"]["finish_reason"] == "length"
        assert final["generated_text"] == "".join(line["token"]["text"] for line in lines)
