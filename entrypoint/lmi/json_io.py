"""JSON in and out of the LMI layer on the per-token path: msgspec where vLLM installed it, json otherwise."""

from __future__ import annotations

import json
from typing import Any

try:  # vLLM depends on msgspec (0.26 and 0.32): 3-10x faster than json on the per-token path
    import msgspec

    _msgspec_decode: Any = msgspec.json.decode
    _msgspec_encode: Any = msgspec.json.encode
except ImportError:  # pragma: no cover - only without vLLM installed
    _msgspec_decode = _msgspec_encode = None


def loads_vllm(raw: bytes) -> Any:
    """Decode JSON that vLLM wrote (bounded numbers, valid UTF-8): msgspec, json as the fallback.

    Client bodies go through json.loads instead: msgspec refuses integers beyond 64 bits, which
    are valid JSON (and deserve vLLM's range error, not "not JSON").
    """
    if _msgspec_decode is not None:
        try:
            return _msgspec_decode(raw)
        except ValueError:
            pass
    return json.loads(raw)


# Characters Python's str.splitlines (and JavaScript's line terminators) treat as line breaks that JSON
# leaves raw: msgspec writes them unescaped, so a client splitting decoded text would cut a token line in
# two (hypothesis found U+0085 in a fresh-clone make test). Escaping them keeps one JSON line per line.
_RAW_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


def dumps_line(obj: Any) -> bytes:
    """One compact JSON document as UTF-8 bytes (text with lone surrogates falls back to escapes)."""
    if _msgspec_encode is not None:
        try:
            out = _msgspec_encode(obj)
        except (UnicodeEncodeError, TypeError, OverflowError):
            pass
        else:
            for raw, escaped in _RAW_LINE_BREAKS:
                if raw in out:
                    out = out.replace(raw, escaped)
            return out
    return json.dumps(obj).encode()
