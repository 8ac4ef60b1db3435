"""What the client sent to /invocations: which schema the body uses, and an LMI body → a vLLM completion body.

Pure functions, no I/O; `entrypoint.lmi.middleware` calls them from inside vLLM's server:

    /invocations body ─classify_body─▶ "inputs" ─parse_lmi_request─▶ vLLM /v1/completions body

Bodies with "prompt" or "messages" are classified and then left untouched. The answer goes back through
`response` (JSON) or `stream` (jsonlines). The LMI names and defaults follow djl-serving's vLLM handler
(docs/reference/lmi-sagemaker-contract.md).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from entrypoint.lmi.errors import LMIError, field_error
from entrypoint.lmi.parameter_names import LMI_PARAMETERS, refuse_unknown_keys, screen
from entrypoint.utils.text import find_lone_surrogate

LMI_DEFAULT_MAX_NEW_TOKENS = 30  # LMI's default; users complain it is short, but clients rely on it
CUSTOM_ATTRIBUTES_HEADER = "x-amzn-sagemaker-custom-attributes"
CUSTOM_ATTRIBUTES_MAX_CHARS = 1024  # SageMaker's own limit on CustomAttributes
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # vLLM's bounds on a seed


class Schema(StrEnum):
    LMI = "inputs"  # TGI-style {"inputs", "parameters", "stream"}: translated
    COMPLETION = "prompt"  # OpenAI completions: passed through
    CHAT = "messages"  # OpenAI chat completions: passed through


_JSON_TYPE_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


# --------------------------------------------------------------------------------------------
# Which schema a body uses


class _NonFiniteConstant(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    """json.loads' hook for NaN, Infinity, -Infinity: Python accepts them, JSON (RFC 8259) does not."""
    raise _NonFiniteConstant(f"{name} is not a JSON number; send a finite number")


def _finite_float(literal: str) -> float:
    """json.loads' hook for number literals with a fraction or exponent: 1e400 would become inf."""
    value = float(literal)
    if not math.isfinite(value):
        raise _NonFiniteConstant(f"{literal[:40]} is out of the range of a double; send a finite number")
    return value


def _number_problem(exc: ValueError) -> str:
    if isinstance(exc, _NonFiniteConstant):
        return str(exc)
    if "integer string conversion" in str(exc):
        # Python refuses to convert longer integer literals (a CPU-exhaustion guard); its own message
        # points at sys.set_int_max_str_digits, which means nothing to a client.
        return f"body has an integer literal over {sys.get_int_max_str_digits()} digits"
    return f"body is not valid JSON ({exc})"


def _first_lone_surrogate(body: dict[str, Any]) -> tuple[str, int, str] | None:
    """Where the first string (key or value) with a lone surrogate is: (path, character index, the surrogate).

    json.loads joins an escaped pair (\\ud83d\\ude00) into one character and keeps a lone escape (\\ud800) as
    it is; such a string cannot be encoded as UTF-8, and vLLM's tokenizer refuses it with a message about codecs.
    """
    pending: list[tuple[str, Any]] = [("body", body)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            found = find_lone_surrogate(value)
            if found:
                return path, found.start(), found.group()
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                found = find_lone_surrogate(key)
                if found:
                    return f"a key of {path}", found.start(), found.group()
                pending.append((key if path == "body" else f"{path}.{key}", item))
        elif isinstance(value, list):
            pending.extend((f"{path}[{index}]", item) for index, item in reversed(list(enumerate(value))))
    return None


def classify_body(raw: bytes) -> tuple[Schema, dict[str, Any]]:
    """Decode an /invocations body and say which schema it uses; LMIError(400) when none fits."""
    if not raw.strip():
        raise LMIError(
            400, "Input parsing failed: empty request body; send a JSON object with 'inputs', 'prompt' or 'messages'"
        )
    try:
        body = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LMIError(400, f"Input parsing failed: body is not valid JSON ({exc})") from None
    except RecursionError:  # b"[" * 100000: the decoder recurses per level
        raise LMIError(400, "Input parsing failed: body nests JSON arrays/objects too deeply") from None
    except ValueError as exc:  # an integer literal over sys.get_int_max_str_digits(), or NaN/Infinity
        raise LMIError(400, f"Input parsing failed: {_number_problem(exc)}") from None
    if not isinstance(body, dict):
        raise LMIError(
            400,
            f"Input parsing failed: body must be a JSON object with 'inputs', 'prompt' or 'messages', "
            f"got a JSON {_JSON_TYPE_NAMES.get(type(body), type(body).__name__)}",
        )
    surrogate = _first_lone_surrogate(body)
    if surrogate is not None:
        where, index, char = surrogate
        raise LMIError(
            400,
            f"Input parsing failed: {where} holds a lone UTF-16 surrogate \\u{ord(char):04x} at character {index}; "
            "JSON text must be valid Unicode: escape a character outside the BMP as a pair (\\ud83d\\ude00) "
            "or send it as UTF-8",
        )
    present = [schema for schema in Schema if schema.value in body]
    if not present:
        keys = ", ".join(sorted(map(str, body))[:10]) or "none"
        raise LMIError(
            400,
            f"Input parsing failed: body must contain prompt, inputs, or messages (keys found: {keys})",
        )
    if len(present) > 1:
        both = " and ".join(repr(s.value) for s in present)
        raise LMIError(400, f"Input parsing failed: body has both {both}; send exactly one of them")
    return present[0], body


# --------------------------------------------------------------------------------------------
# LMI request → vLLM completion request


@dataclass(frozen=True)
class LMIRequest:
    """A validated LMI request and the vLLM completion body it became."""

    completion: dict[str, Any]  # JSON body for vLLM's completions handler
    stream: bool = False
    batch: bool = False  # "inputs" was a list: the answer is a list, one object per input
    details: bool = False
    decoder_input_details: bool = False
    seed: int | None = None
    # return_full_text: each input, prepended here to its generated_text. Not vLLM's `echo`: vLLM drops the echoed
    # prompt whenever return_token_ids is set (details, streams; completion/serving.py of 0.32) and never echoes in a
    # stream.
    return_full_text: bool = False
    # option.tgi_compat: what TGI's token shape needs of the served tokenizer; None: LMI's token shape
    tgi: TgiTokens | None = None
    # each input's text: LMI's details carry it as `inputs` (djl-serving's output_formatter.py)
    inputs: tuple[str, ...] = ()

    @property
    def full_text_prefixes(self) -> tuple[str, ...]:
        """The texts prepended to the answers: the inputs under return_full_text, else none."""
        return self.inputs if self.return_full_text else ()

    def full_text_prefix(self, index: int) -> str:
        """What goes before input `index`'s generated text: the input itself under return_full_text, else ""."""
        return (self.input_text(index) or "") if self.return_full_text else ""

    def input_text(self, index: int) -> str | None:
        """Input `index`'s text, for details.inputs."""
        return self.inputs[index] if index < len(self.inputs) else None


@dataclass(frozen=True)
class TgiTokens:
    """TGI's token shape (option.tgi_compat), from the served tokenizer: which ids are special tokens, and one id's
    text (vLLM gives the prompt's first token no text; TGI's clients require one)."""

    special_ids: frozenset[int]
    decode: Callable[[int], str]


# The vLLM completion field each LMI name became: vLLM's own errors name these, the client sent
# the LMI name. Any other pass-through key k is parameters.k (lmi_field_name).
_LMI_NAME_OF_FORWARDED = {
    "prompt": "inputs",
    "stream": "stream",
    "max_tokens": "parameters.max_new_tokens",
    "truncate_prompt_tokens": "parameters.truncate",
    "echo": "parameters.return_full_text",
    "ignore_eos": "parameters.ignore_eos_token",
    "logprobs": "parameters.details",
    "return_token_ids": "parameters.details",
    "prompt_logprobs": "parameters.decoder_input_details",
}


def lmi_field_name(forwarded: str) -> str:
    """The LMI name the client used for a top-level field of the forwarded completion body."""
    return _LMI_NAME_OF_FORWARDED.get(forwarded, f"parameters.{forwarded}")


# vLLM's own words for a translated field, as its 400s for an LMI body put them: "max_tokens=600
# cannot be greater than max_model_len=512 ... (parameter=max_tokens, value=600)". The bare word
# "prompt" stays ("your prompt contains ..." is right as it is); only vLLM's parameter= tag says it.
_VLLM_WORDS = re.compile(r"\b(?:max_tokens|truncate_prompt_tokens|parameter=prompt)\b")
_LMI_WORDS = {
    "max_tokens": "parameters.max_new_tokens",
    "truncate_prompt_tokens": "parameters.truncate",
    "parameter=prompt": "parameter=inputs",
}


def lmi_words(message: str) -> str:
    """vLLM's error message for a translated body, with the names of the fields the client sent."""
    return _VLLM_WORDS.sub(lambda match: _LMI_WORDS[match.group()], message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def _want_bool(params: Mapping[str, Any], name: str) -> bool | None:
    value = params.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise field_error(f"parameters.{name}", value, "true or false")


def _want_int(params: Mapping[str, Any], name: str, minimum: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if not _is_int(value) or value < minimum:
        raise field_error(f"parameters.{name}", value, f"an integer >= {minimum}")
    return value


def _want_number(params: Mapping[str, Any], name: str, low: float, high: float, low_open: bool) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    bracket = "(" if low_open else "["
    if not _is_number(value) or value < low or (low_open and value == low) or value > high:
        upper = "inf" if math.isinf(high) else f"{high:g}"
        raise field_error(f"parameters.{name}", value, f"a number in {bracket}{low:g}, {upper}]")
    return float(value)


def _stop_list(params: Mapping[str, Any]) -> list[str]:
    stops: list[str] = []
    for name in ("stop_sequences", "stop"):
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            raise field_error(f"parameters.{name}", value, "a non-empty string or a list of non-empty strings")
        stops.extend(s for s in value if s not in stops)
    return stops


def _has_non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(item) for item in value)
    return False


def parse_lmi_request(
    body: Mapping[str, Any], completion_fields: Collection[str] | None = None, details_default: bool = False
) -> LMIRequest:
    """Validate an LMI body and build the vLLM completion request; LMIError(400) names the field or unknown key.

    completion_fields: the names vLLM's CompletionRequest takes; what becomes of every other name:
    entrypoint.lmi.parameter_names (None: unknown names are not checked). details_default: `details` where the body
    does not say (true under option.tgi_compat, as in LMI)."""
    refuse_unknown_keys(body, completion_fields)
    inputs = body.get("inputs")
    batch = isinstance(inputs, list)
    # vLLM refuses an empty prompt in its own words ("The decoder prompt cannot be empty")
    items = inputs if batch else [inputs]
    if not items or not all(isinstance(item, str) and item for item in items):
        raise field_error("inputs", inputs, "a non-empty string, or a non-empty list of non-empty strings")

    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise field_error("stream", stream, "true or false")
    if stream and batch:
        raise field_error("stream", stream, "false when 'inputs' is a list (streaming takes one input)")

    params = body.get("parameters")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise field_error("parameters", params, "a JSON object")
    params = screen(params, completion_fields)

    max_new_tokens = _want_int(params, "max_new_tokens", 1)
    temperature = _want_number(params, "temperature", 0.0, 2.0, low_open=False)  # vLLM refuses > 2
    top_p = _want_number(params, "top_p", 0.0, 1.0, low_open=True)
    top_k = _want_int(params, "top_k", -1)
    repetition_penalty = _want_number(params, "repetition_penalty", 0.0, math.inf, low_open=True)
    seed = params.get("seed")
    if seed is not None and not (_is_int(seed) and INT64_MIN <= seed <= INT64_MAX):
        # vLLM's request model bounds it; beyond, its router answers no field name at all
        raise field_error("parameters.seed", seed, f"an integer in [{INT64_MIN}, {INT64_MAX}]")
    truncate = _want_int(params, "truncate", 1)
    do_sample = _want_bool(params, "do_sample")
    details_asked = _want_bool(params, "details")
    details = details_default if details_asked is None else details_asked
    decoder_input_details = bool(_want_bool(params, "decoder_input_details"))
    if decoder_input_details and stream:
        # A stream's lines have no place for the prompt's tokens (LMI's and TGI's last stream details carry no
        # prefill), so the flag would be dropped without a word; TGI refuses it too ("`decoder_input_details` == true
        # is not supported when streaming tokens").
        raise field_error(
            "parameters.decoder_input_details",
            decoder_input_details,
            'false or null when "stream" is true (a stream carries no details.prefill; send "stream": false to get it)',
        )
    return_full_text = bool(_want_bool(params, "return_full_text"))
    ignore_eos = bool(_want_bool(params, "ignore_eos_token"))
    stops = _stop_list(params)

    # Any other key is a vLLM completion field passed through by name (parameter_names.screen let it
    # through); vLLM validates it and its 400 comes back in LMI's shape. What we forward must be JSON, so a
    # non-finite number (a caller that built the dict itself; classify_body refuses them) is a 400.
    completion: dict[str, Any] = {k: v for k, v in params.items() if k not in LMI_PARAMETERS}
    for name, value in completion.items():
        if _has_non_finite(value):
            raise field_error(f"parameters.{name}", value, "JSON values with finite numbers")
    completion["prompt"] = inputs
    completion["max_tokens"] = LMI_DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    # LMI's do_sample defaults to false: greedy unless the client asks for sampling, either with
    # do_sample=true or by giving a temperature. do_sample=false wins over a temperature.
    if do_sample is False or (do_sample is None and temperature is None):
        completion["temperature"] = 0.0
    elif temperature is not None:
        completion["temperature"] = temperature
    for name, value in (("top_p", top_p), ("top_k", top_k), ("repetition_penalty", repetition_penalty)):
        if value is not None:
            completion[name] = value
    if seed is not None:
        completion["seed"] = seed
    if stops:
        completion["stop"] = stops
    if truncate is not None:
        completion["truncate_prompt_tokens"] = truncate
    if ignore_eos:
        completion["ignore_eos"] = True
    if details:
        completion["logprobs"] = 0  # the sampled token's logprob only
    if decoder_input_details:
        completion["prompt_logprobs"] = 0
    if details or decoder_input_details or stream:
        completion["return_token_ids"] = True  # ids for details.tokens and stream token lines
    if stream:
        completion["stream"] = True
    return LMIRequest(
        completion=completion,
        stream=stream,
        batch=batch,
        details=details,
        decoder_input_details=decoder_input_details,
        seed=seed,
        return_full_text=return_full_text,
        inputs=tuple(items),
    )


# --------------------------------------------------------------------------------------------
# SageMaker CustomAttributes


def parse_custom_attributes(header: str | None) -> dict[str, str]:
    """`X-Amzn-SageMaker-Custom-Attributes: k=v;k2=v2` → {"k": "v", "k2": "v2"}.

    SageMaker passes the client's string through unchecked (up to 1024 characters), so nothing
    here raises: an entry without "=" becomes a key with an empty value, blanks are dropped, the
    first occurrence of a key wins.
    """
    if not header:
        return {}
    attributes: dict[str, str] = {}
    for entry in header[:CUSTOM_ATTRIBUTES_MAX_CHARS].split(";"):
        key, _, value = entry.partition("=")
        key = key.strip()
        if key and key not in attributes:
            attributes[key] = value.strip()
    return attributes
