"""How /invocations answers LMI/TGI bodies: the planning side writes it into the server's environment, the LMI
middleware inside vLLM's server reads it back (the two sides share no other module).

LMI's own shapes by default: a JSON object per input, streams as application/jsonlines. `option.tgi_compat=true` asks
for TGI's, as LMI does it (djl_python/output_formatter.py): a unary answer inside a JSON array, details on unless the
request says otherwise, each token with TGI's `special` flag, and streams as Server-Sent Events, which TGI's clients
read (huggingface_hub's InferenceClient expects `data:` lines). `option.output_formatter=sse` asks for SSE streams
alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

STREAM_FORMAT_ENV = "MOE_LMI_STREAM_FORMAT"
TGI_COMPAT_ENV = "MOE_LMI_TGI_COMPAT"
RESPONSE_FORMAT_ENVS = (STREAM_FORMAT_ENV, TGI_COMPAT_ENV)


class StreamFormat(StrEnum):
    JSONLINES = "jsonlines"  # LMI's default: one JSON object per line, application/jsonlines
    SSE = "sse"  # `data: {...}` events, text/event-stream: what TGI answers


@dataclass(frozen=True)
class ResponseFormat:
    stream: StreamFormat = StreamFormat.JSONLINES
    tgi_compat: bool = False

    def env(self) -> dict[str, str]:
        """The server's environment for this format (both variables, so a value left in the container's environment
        cannot override the plan)."""
        return {STREAM_FORMAT_ENV: self.stream.value, TGI_COMPAT_ENV: "true" if self.tgi_compat else "false"}

    def describe(self) -> str:
        unary = "each answer inside a JSON array, details on by default" if self.tgi_compat else "JSON objects"
        return f"{unary}; streams as {'SSE' if self.stream is StreamFormat.SSE else 'application/jsonlines'}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> tuple[ResponseFormat, str | None]:
        """(the format the plan set, or LMI's default; why a value was not understood, or None). Unset is the
        default: a server started without the plan (tests, `vllm serve` by hand) answers as LMI does."""
        stream_text = environ.get(STREAM_FORMAT_ENV, StreamFormat.JSONLINES.value).strip().lower()
        compat_text = environ.get(TGI_COMPAT_ENV, "false").strip().lower()
        problems = []
        try:
            stream = StreamFormat(stream_text)
        except ValueError:
            stream = StreamFormat.JSONLINES
            problems.append(f"{STREAM_FORMAT_ENV}={stream_text!r} (accepted: jsonlines, sse)")
        if compat_text not in ("true", "false"):
            problems.append(f"{TGI_COMPAT_ENV}={compat_text!r} (accepted: true, false)")
        why = "; ".join(problems) + ": LMI's default used instead" if problems else None
        return cls(stream, compat_text == "true"), why
