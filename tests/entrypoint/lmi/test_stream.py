"""vLLM's server-sent events → LMI jsonlines: one line per token, a final line, errors; split anywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entrypoint.lmi.request import LMIRequest, TgiTokens
from entrypoint.lmi.stream import LMIStreamTranslator, split_chunk_tokens, split_sse


def sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(
        b"data: " + (e.encode() if isinstance(e, str) else json.dumps(e).encode()) + b"\n\n" for e in events
    )


def chunk(text: str, ids: list[int], finish: str | None = None, stop_reason: Any = None) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "text": text, "token_ids": ids, "finish_reason": finish, "stop_reason": stop_reason}]
    }


def read_lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines()]


def test_stream_one_line_per_token_and_the_final_line_has_everything() -> None:
    translator = LMIStreamTranslator(LMIRequest(completion={}, stream=True, details=True, seed=3, inputs=("x",)))
    out = translator.feed(sse(chunk(" a", [1]), chunk(" b", [2]), chunk(" c", [3], "stop", "c"), "[DONE]"))
    lines = read_lines(out)
    assert [line["token"]["id"] for line in lines] == [1, 2, 3]
    assert [line["index"] for line in lines] == [0, 1, 2]
    assert lines[0] == {
        "index": 0,
        "token": {"id": 1, "text": " a", "log_prob": None},
        "generated_text": None,
        "details": None,
    }
    assert lines[-1]["generated_text"] == " a b c"
    assert lines[-1]["details"]["finish_reason"] == "stop_sequence"
    assert lines[-1]["details"]["generated_tokens"] == 3 and lines[-1]["details"]["seed"] == 3
    assert lines[-1]["details"]["inputs"] == "x"  # LMI's stream details carry the input
    assert translator.finished and translator.close() == b""


@pytest.mark.parametrize(
    ("event", "line"),
    [
        pytest.param(
            {"error": {"message": "engine died", "code": 500}}, {"code": 500, "error": "engine died"}, id="nested"
        ),
        pytest.param(
            {"object": "error", "message": "bad", "code": 400}, {"code": 400, "error": "bad"}, id="older flat"
        ),
        pytest.param({"error": {"message": "odd", "code": "x"}}, {"code": 500, "error": "odd"}, id="non-int code"),
    ],
)
def test_stream_error_event_becomes_a_final_error_line(event: dict[str, Any], line: dict[str, Any]) -> None:
    translator = LMIStreamTranslator(LMIRequest(completion={}, stream=True))
    out = translator.feed(sse(chunk(" a", [1]), event, "[DONE]"))
    assert read_lines(out)[-1] == line


def test_stream_cut_short_ends_with_an_error_line() -> None:
    translator = LMIStreamTranslator(LMIRequest(completion={}, stream=True))
    lines = read_lines(translator.feed(sse(chunk(" a", [1]))) + translator.close())
    assert lines[-1]["code"] == 500 and "before a finish reason" in lines[-1]["error"]


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.tuples(st.text(max_size=4), st.lists(st.integers(0, 511), max_size=3)), max_size=8),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
    finish=st.sampled_from(["length", "stop"]),
)
def test_stream_is_split_anywhere_and_still_adds_up(
    pieces: list[tuple[str, list[int]]], cuts: list[int], finish: str
) -> None:
    """However the bytes are cut, the lines' texts concatenate to the final generated_text, and the
    token ids are exactly vLLM's, in order."""
    events = [chunk(text, ids) for text, ids in pieces] + [chunk("", [], finish)]
    raw = sse(*events, "[DONE]")
    translator = LMIStreamTranslator(LMIRequest(completion={}, stream=True, details=True))
    out = b""
    start = 0
    for cut in sorted(c % (len(raw) + 1) for c in cuts):
        out += translator.feed(raw[start:cut])
        start = max(start, cut)
    out += translator.feed(raw[start:]) + translator.close()
    lines = read_lines(out)
    final = lines[-1]
    tokens = [line["token"] for line in lines if line["token"] is not None]
    assert final["generated_text"] == "".join(text for text, _ in pieces)
    assert "".join(t["text"] for t in tokens) == final["generated_text"]
    assert [t["id"] for t in tokens if t["id"] is not None] == [i for _, ids in pieces for i in ids]
    assert final["details"]["generated_tokens"] == sum(len(ids) for _, ids in pieces)


@given(
    text=st.text(max_size=6),
    ids=st.lists(st.integers(0, 9), min_size=1, max_size=4),
    texts=st.none() | st.lists(st.text(max_size=3), max_size=4),
)
def test_split_chunk_tokens_texts_always_concatenate_to_the_chunk(
    text: str, ids: list[int], texts: list[str] | None
) -> None:
    tokens = split_chunk_tokens(text, ids, texts, None)
    assert [t["id"] for t in tokens] == ids
    assert "".join(t["text"] for t in tokens) == text


def test_lmis_stream_tokens_carry_their_log_prob_once_each_and_a_text_only_finish_has_a_null_one() -> None:
    """Each token object is shaped once: its value survives as `log_prob` (a second pass would have set it to null)."""
    with_logprobs = chunk(" a", [1])
    with_logprobs["choices"][0]["logprobs"] = {"tokens": [" a"], "token_logprobs": [-0.5]}
    req = LMIRequest(completion={}, stream=True, details=True, inputs=("x",))
    lines = read_lines(LMIStreamTranslator(req).feed(sse(with_logprobs, chunk(" tail", [], "stop"))))
    assert [line["token"] for line in lines] == [
        {"id": 1, "text": " a", "log_prob": -0.5},
        {"id": None, "text": " tail", "log_prob": None},
    ]
    assert lines[-1]["details"]["tokens"] == [{"id": 1, "text": " a", "log_prob": -0.5}]


def test_split_sse_keeps_a_partial_event() -> None:
    assert split_sse(b"data: 1\n\ndata: 2\n") == ([b"1"], b"data: 2\n")


def test_split_sse_joins_multi_line_data_and_skips_comments() -> None:
    assert split_sse(b": ping\n\ndata: a\ndata: b\n\nevent: x\ndata:c\n\n") == ([b"a\nb", b"c"], b"")


def test_tgis_shape_gives_every_event_an_int_id_and_the_short_stream_details() -> None:
    """TGI's clients parse every event's token (int id, `special`); a finish that carries text without a token, or
    nothing, gets the placeholder id -1 (special only when it has no text). The last event's details are TGI's."""
    tgi = TgiTokens(frozenset({2}), lambda token_id: "")
    req = LMIRequest(completion={}, stream=True, details=True, seed=3, tgi=tgi, inputs=("x",))
    lines = read_lines(LMIStreamTranslator(req).feed(sse(chunk(" a", [2]), chunk(" tail", [], "stop"))))
    assert [line["token"] for line in lines] == [
        {"id": 2, "text": " a", "logprob": None, "special": True},
        {"id": -1, "text": " tail", "logprob": None, "special": False},
    ]
    assert lines[-1]["details"] == {"finish_reason": "eos_token", "generated_tokens": 1, "seed": 3, "inputs": "x"}
    ended = read_lines(LMIStreamTranslator(req).feed(sse(chunk(" a", [1]), chunk("", [], "length"))))
    assert ended[-1]["token"] == {"id": -1, "text": "", "logprob": None, "special": True}
    assert ended[-1]["generated_text"] == " a"
    lmi = read_lines(LMIStreamTranslator(LMIRequest(completion={}, stream=True)).feed(sse(chunk("", [], "length"))))
    assert lmi == [{"index": 0, "token": None, "generated_text": "", "details": None}]  # LMI's line: unchanged
