"""option.tgi_compat on the real CPU engine: TGI's own Python client (huggingface_hub's InferenceClient) reads both
the unary answer and the stream of /invocations, as it does against TGI. Without the option its stream reads nothing:
it expects Server-Sent Events, and LMI's jsonlines are not (tests/e2e/test_requests.py reads the unary answer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tools.local_server import Server


@pytest.fixture(scope="module")
def tgi_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("tgi") / "serve.log"
    server = Server(["serve", "--model", str(tiny_model), "--host", "127.0.0.1"], log,
                    env={"OPTION_TGI_COMPAT": "true"}).start()  # fmt: skip
    yield server
    server.stop()


def test_the_plan_says_so(tgi_server: Server) -> None:
    log = tgi_server.log_path.read_text(errors="replace")
    assert "responses to LMI/TGI bodies: each answer inside a JSON array, details on by default; streams as SSE" in log


def test_special_flags_prefill_texts_and_the_full_text_come_from_the_served_model(tgi_server: Server) -> None:
    """Token 0 of the tiny model is <|endoftext|>, a special token: forced, it must come back special. The prompt's
    first token gets its text from the tokenizer (vLLM gives it none), and return_full_text keeps the prompt with the
    details this option turns on."""
    with httpx.Client(base_url=tgi_server.url, timeout=60) as client:
        forced = {"max_new_tokens": 2, "allowed_token_ids": [0], "ignore_eos_token": True}
        (answer,) = client.post("/invocations", json={"inputs": "Hello", "parameters": forced}).json()
        assert [t["special"] for t in answer["details"]["tokens"]] == [True, True], answer
        asked = {"max_new_tokens": 2, "decoder_input_details": True, "return_full_text": True}
        (answer,) = client.post("/invocations", json={"inputs": "Hello world", "parameters": asked}).json()
        assert answer["generated_text"].startswith("Hello world") and len(answer["details"]["tokens"]) == 2
        assert all(isinstance(token["text"], str) for token in answer["details"]["prefill"]), answer
    assert "special tokens are unknown" not in tgi_server.log_path.read_text(errors="replace")


def test_huggingface_hubs_client_reads_the_stream_token_by_token(tgi_server: Server) -> None:
    from huggingface_hub import InferenceClient

    hub = InferenceClient(model=tgi_server.url + "/invocations", timeout=60)
    events = list(hub.text_generation("Hello", max_new_tokens=6, stream=True, details=True, stop=[], watermark=False))
    assert len(events) == 6
    assert all(isinstance(e.token.special, bool) and isinstance(e.token.id, int) for e in events)
    final = events[-1]
    assert final.generated_text == "".join(e.token.text for e in events)
    assert final.details is not None and final.details.finish_reason == "length" and final.details.generated_tokens == 6


def test_huggingface_hubs_client_reads_the_unary_answer_with_special_flags(tgi_server: Server) -> None:
    from huggingface_hub import InferenceClient

    hub = InferenceClient(model=tgi_server.url + "/invocations", timeout=60)
    out = hub.text_generation("Hello", max_new_tokens=5, details=True, stop=[], watermark=False)
    assert out.details is not None and out.details.generated_tokens == len(out.details.tokens) == 5
    assert all(isinstance(token.special, bool) for token in out.details.tokens)
    assert out.generated_text == "".join(token.text for token in out.details.tokens)


def test_the_wire_shapes_are_tgis(tgi_server: Server) -> None:
    with httpx.Client(base_url=tgi_server.url, timeout=60) as client:
        unary = client.post("/invocations", json={"inputs": "Hello", "parameters": {"max_new_tokens": 3}})
        assert unary.status_code == 200 and isinstance(unary.json(), list)
        (answer,) = unary.json()
        assert answer["details"]["generated_tokens"] == 3  # details on without asking, as in LMI's tgi_compat
        body = {"inputs": "Hello", "stream": True, "parameters": {"max_new_tokens": 3}}
        with client.stream("POST", "/invocations", json=body) as stream:
            assert stream.headers["content-type"] == "text/event-stream"
            text = "".join(stream.iter_text())
        assert text.startswith("data: ") and text.endswith("\n\n") and text.count("data: ") == 3
        # an OpenAI body is vLLM's, whatever the option says
        openai = client.post("/invocations", json={"prompt": "Hello", "max_tokens": 2})
        assert openai.status_code == 200 and openai.json()["object"] == "text_completion"
