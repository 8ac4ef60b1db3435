"""Reading a TCP port from text: the one check behind the CLI's --port and SAGEMAKER_BIND_TO_PORT."""

from __future__ import annotations

import pytest

from entrypoint.utils.ports import parse_port


@pytest.mark.parametrize(("text", "port"), [("1", 1), ("8080", 8080), ("65535", 65535), ("008080", 8080)])
def test_a_port_in_range_is_read(text: str, port: int) -> None:
    assert parse_port(text) == port


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0", id="zero"),
        pytest.param("65536", id="past the range"),
        pytest.param("-1", id="negative"),
        pytest.param("", id="empty"),
        pytest.param(" 80", id="a blank before"),
        pytest.param("80.0", id="a fraction"),
        pytest.param("²", id="a superscript digit: isdigit() is true, int() refuses"),
        pytest.param("٣٠", id="Arabic-Indic digits: int() reads them as 30"),
    ],
)
def test_anything_else_is_none(text: str) -> None:
    assert parse_port(text) is None
