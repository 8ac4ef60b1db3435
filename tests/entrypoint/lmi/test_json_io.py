"""The JSON writer on the per-token path keeps one JSON document per line."""

from __future__ import annotations

import json

import pytest

from entrypoint.lmi.json_io import dumps_line


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029", "\n", "\r"])
def test_a_jsonlines_line_never_contains_a_raw_line_break(char: str) -> None:
    line = dumps_line({"token": {"text": f"a{char}b"}})
    assert len(line.decode().splitlines()) == 1
    assert json.loads(line)["token"]["text"] == f"a{char}b"
