"""Why vLLM refused a body: its own request models, run after its 400, naming the field the client sent."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vllm.entrypoints.openai.completion.protocol import CompletionRequest

from entrypoint.lmi import refusal
from entrypoint.lmi.refusal import find_problem, lmi_refusal, openai_refusal
from entrypoint.lmi.request import Schema, lmi_field_name, parse_lmi_request

CHAT, COMPLETION = Schema.CHAT, Schema.COMPLETION
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("schema", "body", "described"),
    [
        pytest.param(COMPLETION, {"prompt": 5}, "prompt=5: expected a valid list or a valid string", id="prompt type"),
        pytest.param(
            COMPLETION,
            {"prompt": [-1]},
            "prompt[0]=-1: expected a value greater than or equal to 0 or a valid list or a valid string",
            id="token id",
        ),
        pytest.param(
            COMPLETION,
            {"prompt": "hi", "seed": 2**63},
            "seed=9223372036854775808: expected a value less than or equal to 9223372036854775807",
            id="seed beyond int64",
        ),
        pytest.param(
            COMPLETION,
            {"prompt": "hi", "logit_bias": {"7": "x"}},
            "logit_bias[\"7\"]='x': expected a valid number, unable to parse string as a number",
            id="a key that is no identifier",
        ),
        pytest.param(
            COMPLETION,
            {"prompt": ""},
            "prompt='': Either prompt or prompt_embeds must be provided and non-empty.",
            id="vLLM's own validator",
        ),
        pytest.param(CHAT, {"messages": None}, "messages=None: expected a list of message objects", id="null"),
        pytest.param(CHAT, {"messages": {}}, "messages={}: expected a list of message objects", id="object"),
        pytest.param(
            CHAT, {"messages": [{"content": "hi"}]}, "messages[0].role is missing: required", id="missing role"
        ),
        pytest.param(
            CHAT,
            {"messages": [{"role": "user", "content": None}]},
            "messages[0].content=None: expected a valid string or iterable or a valid list",
            id="null content",
        ),
        pytest.param(
            CHAT,
            {"messages": ["hi"]},
            "messages[0]='hi': expected a valid dictionary or a valid dictionary or instance of Message",
            id="message as a string",
        ),
        pytest.param(
            CHAT,
            {"messages": HI, "max_tokens": 2.5},
            "max_tokens=2.5: expected a valid integer, got a number with a fractional part",
            id="fractional max_tokens",
        ),
        pytest.param(CHAT, {"messages": HI, "tools": "x"}, "tools='x': expected a valid list", id="tools"),
    ],
)
def test_the_first_refused_field_is_named_with_its_value(schema: Schema, body: dict[str, Any], described: str) -> None:
    problem = find_problem(body, schema)
    assert problem is not None and problem.describe() == described


@pytest.mark.parametrize(
    ("schema", "body"),
    [(COMPLETION, {"prompt": ["a", "b"], "max_tokens": 3, "anything": [1]}), (CHAT, {"messages": HI})],
    ids=["completion", "chat"],
)
def test_a_body_vllm_accepts_has_no_problem(schema: Schema, body: dict[str, Any]) -> None:
    assert find_problem(body, schema) is None


def test_lmi_bodies_name_the_lmi_fields() -> None:
    completion = parse_lmi_request({"inputs": "hi", "parameters": {"min_tokens": "x"}}).completion
    error = lmi_refusal(completion, 400, b'{"error": {"message": "Cannot find suitable handler for request."}}')
    assert error.code == 400
    expected = "parameters.min_tokens='x': expected a valid integer, unable to parse string as an integer"
    assert error.message == f"Input parsing failed: {expected}"
    broken = dict(completion, min_tokens=1, max_tokens="x")  # a translated field: its LMI name
    assert lmi_refusal(broken, 400, b"").message.startswith("Input parsing failed: parameters.max_new_tokens='x'")


@pytest.mark.parametrize("status", [400, 422], ids=["a 400 validation cannot explain", "another status"])
def test_vllms_own_error_stands_where_validation_finds_nothing(status: int) -> None:
    completion = parse_lmi_request({"inputs": "hi", "parameters": {"max_new_tokens": 600}}).completion
    raw = b'{"error": {"message": "max_tokens=600 cannot be greater than max_model_len=512.", "code": 400}}'
    error = lmi_refusal(completion, status, raw)
    assert error.code == status
    assert (
        error.message == "Input parsing failed: parameters.max_new_tokens=600 cannot be greater than max_model_len=512."
    )


def test_openai_refusal_keeps_vllms_error_shape() -> None:
    assert openai_refusal({"prompt": "hi", "user": {}}, COMPLETION) == {
        "error": {
            "message": "user={}: expected a valid string",
            "type": "BadRequestError",
            "param": "user",
            "code": 400,
        }
    }
    assert openai_refusal({"prompt": "hi"}, COMPLETION) is None


def test_without_vllms_models_nothing_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refusal, "_MODEL_HOMES", {COMPLETION: (("no.such.module", "CompletionRequest"),)})
    refusal.request_model.cache_clear()
    try:
        assert find_problem({"prompt": 5}, COMPLETION) is None
    finally:
        refusal.request_model.cache_clear()


# The promise the middleware relies on: whenever vLLM's completion model refuses a translated LMI body (so that
# vLLM's router answers "Cannot find suitable handler"), the refusal names a field the client sent.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(-3, 3) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)
vllm_fields = st.sampled_from(
    ["min_tokens", "presence_penalty", "stop_token_ids", "logit_bias", "response_format", "add_special_tokens", "user"]
)


@settings(max_examples=200, deadline=None)
@given(params=st.dictionaries(vllm_fields, json_values, min_size=1, max_size=3))
def test_every_body_vllm_refuses_gets_a_named_field(params: dict[str, Any]) -> None:
    completion = parse_lmi_request({"inputs": "hi", "parameters": params}).completion
    try:
        CompletionRequest.model_validate(completion)
    except pydantic.ValidationError:
        problem = find_problem(completion, COMPLETION, rename=lmi_field_name)
        assert problem is not None and problem.path.startswith("parameters.")
    else:
        assert find_problem(completion, COMPLETION) is None
