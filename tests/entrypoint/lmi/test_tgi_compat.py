"""TGI's answer shapes on /invocations (option.tgi_compat, option.output_formatter=sse), through LMIMiddleware on the
Starlette app of test_middleware that answers as vLLM does. The real clients against the real server: tests/e2e."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from entrypoint.utils.response_format import STREAM_FORMAT_ENV, TGI_COMPAT_ENV
from tests.entrypoint.lmi.test_middleware import FakeEngine, make_app, run


class Tokenizer:
    all_special_ids = (2, 7)  # token 2 is the fake vLLM's second token: it must come back special


class EngineWithTokenizer(FakeEngine):
    def __init__(self, tokenizer: object) -> None:
        super().__init__()
        self.tokenizer = tokenizer

    def get_tokenizer(self) -> object:
        if self.tokenizer is None:
            raise RuntimeError("no tokenizer in this engine")
        return self.tokenizer


def tgi_client(
    monkeypatch: pytest.MonkeyPatch, tgi_compat: str = "true", stream: str = "sse", tokenizer: object = Tokenizer()
) -> httpx.AsyncClient:
    monkeypatch.setenv(TGI_COMPAT_ENV, tgi_compat)
    monkeypatch.setenv(STREAM_FORMAT_ENV, stream)
    app = make_app()  # the middleware reads the format when the app builds its stack, on the first request
    app.state.engine_client = EngineWithTokenizer(tokenizer)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://t")


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """The SSE events as TGI's clients read them: `data:` lines, one JSON object each, a blank line after each."""
    assert response.text.endswith("\n\n"), response.text
    blocks = response.text.split("\n\n")[:-1]
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks), response.text
    return [json.loads(block.removeprefix("data: ")) for block in blocks]


def test_a_unary_answer_is_an_array_with_details_and_special_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    response = run(tgi_client(monkeypatch).post("/invocations", json={"inputs": "answer"}))
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    (answer,) = response.json()  # TGI's unary answer: a JSON array of one
    assert answer["generated_text"] == " a b"
    assert answer["details"]["tokens"] == [  # details on without asking, as LMI's tgi_compat has it
        {"id": 1, "text": " a", "logprob": -0.1, "special": False},
        {"id": 2, "text": " b", "logprob": -0.2, "special": True},
    ]
    assert answer["details"]["prefill"] == []  # TGI's clients require the list (decoder_input_details fills it)
    assert answer["details"]["inputs"] == "answer"  # LMI's field under tgi_compat too


def test_details_false_is_still_honoured_and_errors_keep_lmis_object(monkeypatch: pytest.MonkeyPatch) -> None:
    client = tgi_client(monkeypatch)
    answer = run(client.post("/invocations", json={"inputs": "answer", "parameters": {"details": False}})).json()
    assert answer == [{"generated_text": " a b"}]
    refused = run(client.post("/invocations", json={"inputs": "error-before"}))
    assert refused.status_code == 400 and refused.json()["code"] == 400  # an error is no answer: not wrapped


def test_a_stream_is_server_sent_events_ending_with_the_text_and_details(monkeypatch: pytest.MonkeyPatch) -> None:
    response = run(tgi_client(monkeypatch).post("/invocations", json={"inputs": "fine", "stream": True}))
    assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
    got = events(response)
    assert [e["token"] for e in got] == [
        {"id": 1, "text": " a", "logprob": None, "special": False},
        {"id": 2, "text": " b", "logprob": None, "special": True},
    ]
    assert got[0]["generated_text"] is None and got[-1]["generated_text"] == " a b"
    assert got[-1]["details"]["finish_reason"] == "length" and got[-1]["details"]["generated_tokens"] == 2


def test_a_failure_mid_stream_is_a_last_event(monkeypatch: pytest.MonkeyPatch) -> None:
    response = run(tgi_client(monkeypatch).post("/invocations", json={"inputs": "raise", "stream": True}))
    got = events(response)
    assert got[0]["token"]["id"] == 1
    assert got[-1] == {"code": 500, "error": "inference failed: RuntimeError"}  # huggingface_hub raises on "error"


def test_output_formatter_sse_alone_frames_streams_and_leaves_answers_as_lmis(monkeypatch: pytest.MonkeyPatch) -> None:
    client = tgi_client(monkeypatch, tgi_compat="false", stream="sse")
    got = events(run(client.post("/invocations", json={"inputs": "fine", "stream": True})))
    assert [e["token"] for e in got] == [
        {"id": 1, "text": " a", "log_prob": None},
        {"id": 2, "text": " b", "log_prob": None},
    ]
    answer = run(client.post("/invocations", json={"inputs": "answer"})).json()
    assert answer == {"generated_text": " a b"}  # an object, no details unless asked


def test_a_tokenizer_that_cannot_be_read_sends_special_false_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="entrypoint.lmi"):
        answer = run(tgi_client(monkeypatch, tokenizer=None).post("/invocations", json={"inputs": "answer"})).json()
    assert [token["special"] for token in answer[0]["details"]["tokens"]] == [False, False]
    assert "tgi_compat: the tokenizer's special tokens are unknown (RuntimeError: no tokenizer" in caplog.text


def test_a_format_the_plan_never_writes_falls_back_to_lmis_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="entrypoint.lmi"):
        client = tgi_client(monkeypatch, tgi_compat="yes", stream="xml")
        response = run(client.post("/invocations", json={"inputs": "fine", "stream": True}))
    assert response.headers["content-type"] == "application/jsonlines"
    assert f"{STREAM_FORMAT_ENV}='xml' (accepted: jsonlines, sse); {TGI_COMPAT_ENV}='yes'" in caplog.text
