"""Which names an LMI body's "parameters" may carry, and what becomes of each, before anything reaches vLLM.

- `LMI_PARAMETERS`: translated by entrypoint.lmi.request (max_new_tokens, do_sample, details, ...);
- any field of vLLM's CompletionRequest (entrypoint.lmi.refusal.completion_fields): passed by name;
- `RESERVED`: vLLM names the translation sets itself or that change the handler (max_tokens, messages, ...): a 400
  naming the LMI way to say it;
- `FOREIGN`: TGI and LMI names with no field of that name in vLLM: translated where vLLM has the same thing
  (`watermark: true` → `watermarking`, `grammar` → `structured_outputs`), dropped at their neutral value, refused
  otherwise, saying why;
- any other name: a 400 naming it and the nearest known name.

The body itself takes only `BODY_KEYS` at its top level; any other key is a 400 too (`refuse_unknown_keys`).

Why refuse names nobody knows: vLLM's request models accept unknown fields and ignore them (OpenAIBaseModel,
pydantic extra="allow"), so a misspelt "max_new_token" would run with the default 30 tokens, without a word. LMI
itself drops unknown parameters with a warning in its log; a client never sees that. A null value means "not set"
for every name: TGI's Python client sends each field of its parameter model, unset ones as null.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from entrypoint.lmi.errors import LMIError, field_error, shown

# The top-level keys of an LMI/TGI body: TGI's /generate and /generate_stream take these three, and so does LMI's
# schema (docs/reference/lmi-sagemaker-contract.md). LMI's other top-level keys ("adapters" for LoRA, session
# "requestType") ask for what this server does not offer, so they are refused like any unknown key.
BODY_KEYS = ("inputs", "parameters", "stream")

# The "parameters" entrypoint.lmi.request translates itself.
LMI_PARAMETERS = frozenset(
    {
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "seed",
        "truncate",
        "do_sample",
        "details",
        "decoder_input_details",
        "return_full_text",
        "ignore_eos_token",
        "stop",
        "stop_sequences",
    }
)

_CHAT_BODY = "an OpenAI chat body ('messages' instead of 'inputs'); an LMI body is a completion"

# Fields the translation itself sets, or that would change what vLLM does with the body: a user
# sending them in "parameters" gets a 400 that names the LMI way to say it, instead of a silent
# override, a silently ignored field or another handler.
RESERVED = {
    "prompt": "top-level 'inputs'",
    "stream": "top-level 'stream'",
    "stream_options": "top-level 'stream'",
    "model": "no model name (the server serves one model)",
    "max_tokens": "max_new_tokens",
    "echo": "return_full_text",
    "logprobs": "details",
    "prompt_logprobs": "decoder_input_details",
    "truncate_prompt_tokens": "truncate",
    "ignore_eos": "ignore_eos_token",
    "return_token_ids": "details",
    "return_tokens_as_token_ids": "details",
    "n": "one generation per input (send a list of inputs for several)",
    "best_of": "one generation per input",
    "max_completion_tokens": "max_new_tokens",
    "prompt_embeds": "top-level 'inputs' (text)",
    # vLLM's /invocations tries its chat request model first: a completion body that also has
    # "messages" is answered by the chat handler, which ignores the prompt (and a batch's length).
    "messages": _CHAT_BODY,
    # Chat-only fields: the completion handler would ignore them without a word.
    **dict.fromkeys(
        (
            "add_generation_prompt",
            "chat_template",
            "chat_template_kwargs",
            "continue_final_message",
            "documents",
            "include_reasoning",
            "media_io_kwargs",
            "mm_processor_kwargs",
            "parallel_tool_calls",
            "reasoning_effort",
            "return_prompt_text",
            "tool_choice",
            "tools",
            "top_logprobs",
        ),
        _CHAT_BODY,
    ),
}
# Reserved names whose value changes nothing: TGI and LMI clients may send them explicitly.
RESERVED_NEUTRAL: dict[str, tuple[Any, ...]] = {"n": (1,), "best_of": (1,)}

_GRAMMAR_TYPES = {"json": "json", "regex": "regex"}  # TGI's grammar type → vLLM's structured_outputs key


def _grammar(value: Any) -> dict[str, Any] | None:
    """TGI's {"type": "json" | "regex", "value": ...} → vLLM's structured_outputs; None if not of that shape."""
    if not isinstance(value, dict) or set(value) != {"type", "value"} or value["type"] not in _GRAMMAR_TYPES:
        return None
    if value["type"] == "regex" and not isinstance(value["value"], str):
        return None
    return {"structured_outputs": {_GRAMMAR_TYPES[value["type"]]: value["value"]}}


@dataclass(frozen=True)
class Foreign:
    """A TGI or LMI parameter vLLM has no field of that name for."""

    neutral: tuple[Any, ...]  # values besides null that change nothing: dropped
    accepted: str  # what the 400 says is accepted
    why: str  # why other values are refused
    translate: Callable[[Any], dict[str, Any] | None] | None = None  # value → vLLM fields; None: refused


FOREIGN = {
    # vLLM 0.32: per request, watermarking true or null watermarks where the server has a watermark config, false
    # opts out. TGI's client sends false by default, so false defers to the server's setting instead of opting out.
    "watermark": Foreign((False,), "true, false or null", "",
                         lambda v: {"watermarking": True} if v is True else None),
    "grammar": Foreign((), 'null or {"type": "json" | "regex", "value": ...}', "", _grammar),
    "top_n_tokens": Foreign((0,), "null or 0", "this server does not return TGI's top_tokens"),
    "typical_p": Foreign((), "null", "vLLM has no typical-p sampling"),
    "adapter_id": Foreign((), "null", "this server serves no LoRA adapter by id"),
    # djl-serving's LMI lists these with its vLLM generation parameters; beam search is not offered on LMI bodies
    "num_beams": Foreign((1,), "null or 1", "beam search: send an OpenAI completion body with use_beam_search"),
    "early_stopping": Foreign((False,), "null or false", "a beam-search setting (see num_beams)"),
}  # fmt: skip


def _is_neutral(value: Any, neutral: tuple[Any, ...]) -> bool:
    return value is None or any(value == n and type(value) is type(n) for n in neutral)


def _shown_name(name: str) -> str:
    """The name as the client sent it, quoted where it could look like another (spaces, invisible characters)."""
    if name.isascii() and name.isprintable() and " " not in name and len(name) <= 80:
        return name
    return json.dumps(name[:80]) + ("…" if len(name) > 80 else "")


def refuse_reserved(params: Mapping[str, Any]) -> None:
    """A 400 for the first reserved name with a value that changes something."""
    for name, value in params.items():
        if name in RESERVED and not _is_neutral(value, RESERVED_NEUTRAL.get(name, ())):
            raise LMIError(
                400,
                f"Input parsing failed: parameters.{_shown_name(name)}={shown(value)}: not accepted in an LMI body's "
                f"parameters; accepted instead: {RESERVED[name]}",
            )


def screen(params: Mapping[str, Any], completion_fields: Collection[str] | None) -> dict[str, Any]:
    """params as vLLM should get them: neutral and null values dropped, foreign names translated; a 400 for the
    rest. completion_fields: the names vLLM's CompletionRequest takes; None (vLLM not importable): not checked."""
    refuse_reserved(params)
    kept: dict[str, Any] = {}
    for name, value in params.items():
        if value is None and name not in LMI_PARAMETERS:  # not set; LMI's own names read null themselves
            continue
        if name in RESERVED:  # neutral here (refuse_reserved took the others)
            continue
        if name in FOREIGN:
            kept.update(_foreign(name, value, FOREIGN[name], params))
            continue
        if completion_fields is not None and name not in LMI_PARAMETERS and name not in completion_fields:
            raise _unknown(name, value, completion_fields)
        kept[name] = value
    return kept


def _foreign(name: str, value: Any, foreign: Foreign, params: Mapping[str, Any]) -> dict[str, Any]:
    if _is_neutral(value, foreign.neutral):
        return {}
    fields = foreign.translate(value) if foreign.translate else None
    if fields is None:
        why = f" ({foreign.why})" if foreign.why else ""
        raise field_error(f"parameters.{name}", value, foreign.accepted + why)
    clash = sorted(set(fields) & set(params))
    if clash:
        raise field_error(f"parameters.{name}", value, f"no {clash[0]} beside it (both set the same thing)")
    return fields


def _parameter_names(completion_fields: Collection[str] | None) -> list[str]:
    """Every name "parameters" accepts (without vLLM's field list: the LMI and TGI names only)."""
    return sorted(LMI_PARAMETERS | FOREIGN.keys() | (set(completion_fields or ()) - set(RESERVED)))


def _unknown(name: str, value: Any, completion_fields: Collection[str]) -> LMIError:
    close = difflib.get_close_matches(name[:200], _parameter_names(completion_fields), n=1, cutoff=0.75)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return LMIError(
        400,
        f"Input parsing failed: parameters.{_shown_name(name)}={shown(value)}: not a parameter{guess}; accepted: the "
        f"LMI parameters ({', '.join(sorted(LMI_PARAMETERS))}) or a vLLM completion field by its name (min_tokens, "
        "stop_token_ids, logit_bias, ...)",
    )


def refuse_unknown_keys(body: Mapping[str, Any], completion_fields: Collection[str] | None) -> None:
    """A 400 for the first top-level key of an LMI body that is not one of BODY_KEYS.

    Why: the translation reads only BODY_KEYS, so a misspelt "parameter", or parameters sent beside "inputs" instead
    of inside "parameters", would run with LMI's defaults (30 tokens, greedy) without a word, as an unknown name inside
    "parameters" would. completion_fields: vLLM's CompletionRequest names, to recognise a misplaced vLLM parameter."""
    for name, value in body.items():
        if name not in BODY_KEYS:
            raise _unknown_key(str(name), value, completion_fields)


def _unknown_key(name: str, value: Any, completion_fields: Collection[str] | None) -> LMIError:
    refused = f"Input parsing failed: {_shown_name(name)}={shown(value)}: not a top-level key of an LMI body"
    accepted = f"accepted at the top level: {', '.join(BODY_KEYS)}"
    if name in RESERVED:  # a vLLM name: say the LMI way, as refuse_reserved does inside "parameters"
        instead = RESERVED[name]
        instead = f"parameters.{instead}" if instead in LMI_PARAMETERS else instead
        return LMIError(400, f"{refused}; accepted instead: {instead}; {accepted}")
    parameters = _parameter_names(completion_fields)
    if name in parameters:  # the commonest mistake: the parameters beside "inputs" instead of inside "parameters"
        return LMIError(
            400,
            f'{refused}; {name} is a parameter: send it inside "parameters", as {{"inputs": ..., "parameters": '
            f'{{"{name}": ...}}}}; {accepted}',
        )
    close = difflib.get_close_matches(name[:200], BODY_KEYS, n=1, cutoff=0.75) or [
        f"parameters.{match}" for match in difflib.get_close_matches(name[:200], parameters, n=1, cutoff=0.75)
    ]
    guess = f" (did you mean {close[0]}?)" if close else ""
    return LMIError(400, f"{refused}{guess}; {accepted}")
