"""vLLM's completion answer → LMI's {"generated_text", "details"}: finish reasons, token and prefill details."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entrypoint.lmi.errors import LMIError
from entrypoint.lmi.request import LMIRequest, TgiTokens


def finish_reason_to_lmi(finish_reason: str | None, stop_reason: int | str | None) -> str | None:
    """LMI's finish_reason from vLLM's pair (LMI itself reads the wrong field; this reads both).

    vLLM says "stop" for three different things; stop_reason tells them apart: None is the
    model's EOS token, an int is a stop token id (generation_config's extra EOS ids, or the
    client's stop_token_ids: end-of-sequence tokens too), a string is the matched stop sequence.
    """
    if finish_reason is None:
        return None
    if finish_reason == "length":
        return "length"
    if finish_reason == "stop":
        return "stop_sequence" if isinstance(stop_reason, str) else "eos_token"
    return finish_reason  # "abort", "error", or whatever a newer vLLM adds: passed on, not hidden


def shape_tokens(tokens: list[dict[str, Any]], tgi: TgiTokens | None) -> list[dict[str, Any]]:
    """Token objects ({"id", "text", "logprob"} as built here) in the answer's shape, in place.

    LMI's shape (tgi None) names the log-probability `log_prob`, as LMI's Token.as_dict does (djl-serving
    request_io.py); LMI clients read that key. TGI's shape (option.tgi_compat) keeps `logprob` and says whether each
    token is one of the tokenizer's special tokens (`special`: TGI's own clients require it)."""
    for token in tokens:
        if tgi is None:
            if "logprob" in token:  # a token shaped already keeps its value
                token["log_prob"] = token.pop("logprob")
        else:
            token["special"] = token["id"] in tgi.special_ids
    return tokens


def _token_entries(choice: Mapping[str, Any]) -> list[dict[str, Any]]:
    """details.tokens from a choice's token_ids and logprobs (prompt entries dropped, should vLLM echo them)."""
    ids = choice.get("token_ids") or []
    logprobs = choice.get("logprobs") or {}
    texts = list(logprobs.get("tokens") or [])
    values = list(logprobs.get("token_logprobs") or [])
    # With echo, vLLM puts the prompt's tokens first in logprobs; the generated ones are the tail.
    texts, values = texts[len(texts) - len(ids) :], values[len(values) - len(ids) :]
    entries = []
    for i, token_id in enumerate(ids):
        entries.append(
            {
                "id": token_id,
                "text": texts[i] if i < len(texts) else None,
                "logprob": values[i] if i < len(values) else None,
            }
        )
    return entries


def _prefill_entries(choice: Mapping[str, Any], tgi: TgiTokens | None) -> list[dict[str, Any]]:
    """details.prefill: the prompt tokens with their logprobs (the first one has none, as in TGI). vLLM gives the
    first no text either; TGI's shape takes it from the tokenizer, since TGI's clients require a text."""
    ids = choice.get("prompt_token_ids") or []
    prompt_logprobs = choice.get("prompt_logprobs") or []
    entries = []
    for i, token_id in enumerate(ids):
        entry = prompt_logprobs[i] if i < len(prompt_logprobs) else None
        info = (entry or {}).get(str(token_id)) or {}
        text = info.get("decoded_token")
        if text is None and tgi is not None:
            text = tgi.decode(token_id)
        entries.append({"id": token_id, "text": text, "logprob": info.get("logprob")})
    if tgi is None:  # LMI's prefill tokens are its Token objects too; TGI's PrefillToken has no `special`
        shape_tokens(entries, None)
    return entries


def lmi_details(choice: Mapping[str, Any], req: LMIRequest, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    details: dict[str, Any] = {
        "finish_reason": finish_reason_to_lmi(choice.get("finish_reason"), choice.get("stop_reason")),
        "generated_tokens": len(tokens),
        "inputs": req.input_text(choice.get("index", 0)),  # LMI's Details field (TGI's clients ignore it)
        "seed": req.seed,
        "tokens": tokens,
    }
    if req.decoder_input_details:
        details["prefill"] = _prefill_entries(choice, req.tgi)
    elif req.tgi is not None:  # TGI's shape (option.tgi_compat): its clients require the list, empty here
        details["prefill"] = []
    return details


def completion_to_lmi(response: Mapping[str, Any], req: LMIRequest) -> dict[str, Any] | list[dict[str, Any]]:
    """vLLM's text_completion object → LMI's answer (a list when the request's inputs was a list)."""
    choices = sorted(response.get("choices") or [], key=lambda c: c.get("index", 0))
    answers = []
    for choice in choices:
        answer: dict[str, Any] = {
            "generated_text": req.full_text_prefix(choice.get("index", 0)) + choice.get("text", "")
        }
        if req.details or req.decoder_input_details:
            answer["details"] = lmi_details(choice, req, shape_tokens(_token_entries(choice), req.tgi))
        answers.append(answer)
    if req.batch:
        return answers
    if len(answers) != 1:
        raise LMIError(500, f"vLLM answered {len(answers)} choices for one input")
    return answers[0]
