"""What reaches /invocations before translation: the body's decoding and schema, and the CustomAttributes header."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entrypoint.lmi.errors import LMIError
from entrypoint.lmi.request import Schema, classify_body, parse_custom_attributes

# ---------------------------------------------------------------------------------------------
# classify_body


@pytest.mark.parametrize(
    ("raw", "schema"),
    [
        pytest.param(b'{"inputs": "hi"}', Schema.LMI, id="inputs means the LMI schema"),
        pytest.param(b'{"prompt": "hi", "max_tokens": 2}', Schema.COMPLETION, id="prompt means completions"),
        pytest.param(b'{"messages": []}', Schema.CHAT, id="messages means chat"),
    ],
)
def test_classify_body_picks_the_schema_from_the_keys(raw: bytes, schema: Schema) -> None:
    assert classify_body(raw)[0] is schema


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"", "empty request body", id="empty body is refused"),
        pytest.param(b"  \n", "empty request body", id="blank body is refused"),
        pytest.param(b"{nope", "not valid JSON", id="broken JSON is refused"),
        pytest.param(b"\xff\xfe", "not valid JSON", id="non-UTF-8 bytes are refused"),
        pytest.param(b"[1, 2]", "got a JSON array", id="a JSON list is refused"),
        pytest.param(b'"text"', "got a JSON string", id="a JSON string is refused"),
        pytest.param(b"null", "got a JSON null", id="null is refused"),
        pytest.param(
            b'{"text": "hi"}',
            "must contain prompt, inputs, or messages (keys found: text)",
            id="unknown schema names the keys it saw",
        ),
        pytest.param(b'{"inputs": "a", "prompt": "b"}', "both 'inputs' and 'prompt'", id="two schemas at once"),
        # json.loads raises RecursionError / ValueError for these, which used to escape as HTTP 500
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "nests JSON arrays/objects too deeply", id="deep nesting"),
        pytest.param(
            b'{"inputs": "x", "parameters": {"max_new_tokens": ' + b"9" * 5000 + b"}}",
            "integer literal over",
            id="a 5000-digit integer",
        ),
        pytest.param(
            b'{"inputs": "x", "parameters": {"temperature": NaN}}', "NaN is not a JSON number", id="NaN constant"
        ),
        pytest.param(b'{"prompt": "x", "max_tokens": -Infinity}', "-Infinity is not a JSON number", id="-Infinity"),
        # Python's decoder turns a literal past a double's range into inf, which is not JSON to send on
        pytest.param(
            b'{"inputs": "x", "parameters": {"my_field": 1e400}}', "1e400 is out of the range", id="1e400 literal"
        ),
        pytest.param(b'{"prompt": "x", "top_p": -2.5E+999}', "-2.5E+999 is out of the range", id="-2.5E+999 literal"),
        # a lone surrogate escape decodes, but UTF-8 cannot encode it; vLLM's own answer names a tokenizer type
        pytest.param(
            b'{"inputs": "a\\ud800b"}', "inputs holds a lone UTF-16 surrogate \\ud800 at character 1", id="inputs"
        ),
        pytest.param(
            b'{"inputs": "a", "parameters": {"stop": ["x", "\\udfff"]}}',
            "parameters.stop[1] holds a lone UTF-16 surrogate \\udfff at character 0",
            id="a stop sequence",
        ),
        pytest.param(
            b'{"messages": [{"role": "user", "content": "\\ude00 then \\ud83d"}]}',
            "messages[0].content holds a lone UTF-16 surrogate \\ude00",
            id="a chat message",
        ),
        pytest.param(b'{"prompt": "x", "\\ud800": 1}', "a key of body holds a lone UTF-16 surrogate", id="a key"),
    ],
)
def test_classify_body_refuses_with_a_400_that_says_why(raw: bytes, message: str) -> None:
    with pytest.raises(LMIError) as caught:
        classify_body(raw)
    assert caught.value.code == 400
    assert message in caught.value.message
    assert caught.value.body() == {"code": 400, "error": caught.value.message}


def test_an_escaped_surrogate_pair_is_one_character_and_accepted() -> None:
    schema, body = classify_body(b'{"inputs": "smile \\ud83d\\ude00", "parameters": {"stop": ["\\ud83d\\ude00"]}}')
    assert schema is Schema.LMI
    assert body["inputs"] == "smile \N{GRINNING FACE}"
    assert json.dumps(body, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# CustomAttributes


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        pytest.param(None, {}, id="no header"),
        pytest.param("accept_eula=true", {"accept_eula": "true"}, id="one pair"),
        pytest.param(" a=1 ; b = two;;c", {"a": "1", "b": "two", "c": ""}, id="blanks, empty and bare keys"),
        pytest.param("a=1;a=2", {"a": "1"}, id="first occurrence wins"),
        pytest.param("x=a=b", {"x": "a=b"}, id="value may contain an equals sign"),
    ],
)
def test_custom_attributes(header: str | None, parsed: dict[str, str]) -> None:
    assert parse_custom_attributes(header) == parsed


@given(st.text(max_size=2000))
def test_custom_attributes_never_raise(header: str) -> None:
    parsed = parse_custom_attributes(header)
    assert all(key and key == key.strip() for key in parsed)
