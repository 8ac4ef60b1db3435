"""vLLM's and FastAPI's error bodies → LMI's {"code", "error"}."""

from __future__ import annotations

import pytest

from entrypoint.lmi.errors import vllm_error_to_lmi


@pytest.mark.parametrize(
    ("status", "raw", "code", "message"),
    [
        pytest.param(
            400,
            b'{"error": {"message": "too long", "type": "BadRequestError", "code": 400}}',
            400,
            "Input parsing failed: too long",
            id="vLLM's current error shape",
        ),
        pytest.param(400, b'{"object": "error", "message": "bad", "code": 400}', 400, "bad", id="older shape"),
        pytest.param(422, b'{"detail": [{"loc": ["body"], "msg": "x"}]}', 422, '"msg": "x"', id="FastAPI 422"),
        pytest.param(415, b'{"detail": "Unsupported Media Type"}', 415, "Unsupported Media Type", id="detail"),
        pytest.param(500, b"Internal Server Error", 500, "Internal Server Error", id="plain text 500"),
        pytest.param(503, b"", 503, "HTTP 503", id="empty body"),
    ],
)
def test_vllm_errors_become_lmi_errors_with_the_same_status(status: int, raw: bytes, code: int, message: str) -> None:
    error = vllm_error_to_lmi(status, raw)
    assert error.code == code
    assert message in error.message
