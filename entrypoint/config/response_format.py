"""option.output_formatter and option.tgi_compat, typed: how /invocations answers LMI/TGI bodies.

LMI reads both (djl_python/output_formatter.py): `tgi_compat=true` wraps a unary answer in a JSON array, turns details
on by default and streams as SSE; `output_formatter` names the stream's framing (`jsonlines`, `sse`) or LMI's JSON
(`json`, its default for unary answers). LMI's chat formatters and custom formatter functions from a model.py are
refused here: LMI itself falls back to its default with a warning in a log the client never sees.
"""

from __future__ import annotations

from entrypoint.utils.errors import ConfigError
from entrypoint.utils.response_format import ResponseFormat, StreamFormat

OUTPUT_FORMATTERS = ("json", "jsonlines", "sse")
_NOT_HERE = (
    "not a formatter this server has (LMI's chat formatters and custom formatter functions from a model.py are not "
    "supported: send OpenAI chat bodies for chat answers)"
)


# LMI reads tgi_compat as a pydantic boolean: these spellings (and unset = false)
_TRUE = ("true", "1", "yes", "on", "t", "y")
_FALSE = ("false", "0", "no", "off", "f", "n")


def parse_tgi_compat(text: str | None, key: str = "option.tgi_compat") -> bool:
    value = (text or "").strip().lower()
    if value in ("", *_FALSE):
        return False
    if value in _TRUE:
        return True
    raise ConfigError(key, text, "not a boolean", ["true", "false"])


def parse_response_format(
    output_formatter: str | None,
    tgi_compat: str | None,
    formatter_key: str = "option.output_formatter",
    compat_key: str = "option.tgi_compat",
) -> ResponseFormat:
    """The answer format from the two options; unset is LMI's default (JSON objects, jsonlines streams)."""
    compat = parse_tgi_compat(tgi_compat, compat_key)
    name = (output_formatter or "").strip().lower()
    if name == "none":
        raise ConfigError(formatter_key, output_formatter, "LMI's raw text/plain answers are not supported here: "
                          "every answer is JSON", OUTPUT_FORMATTERS)  # fmt: skip
    if name and name not in OUTPUT_FORMATTERS:
        raise ConfigError(formatter_key, output_formatter, _NOT_HERE, OUTPUT_FORMATTERS)
    if name in ("jsonlines", "sse"):
        return ResponseFormat(StreamFormat(name), compat)
    # unset or `json`: LMI streams as SSE under tgi_compat, as jsonlines otherwise
    return ResponseFormat(StreamFormat.SSE if compat else StreamFormat.JSONLINES, compat)
