"""Why vLLM refused a body, in the names of the fields the client sent.

vLLM's /invocations router validates a body against each of its request models in turn and, when
none fits, answers 400 "Cannot find suitable handler for request. Expected one of: [...]": no
field, no value. Validating the same body here against the one model the body was meant for
(CompletionRequest for "prompt" and for translated LMI bodies, ChatCompletionRequest for
"messages") finds pydantic's first complaint. It runs only once vLLM has answered 400, so the
success path pays nothing; where it finds nothing, vLLM's own message stands.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from entrypoint.lmi.errors import LMIError, shown, vllm_error_to_lmi
from entrypoint.lmi.request import Schema, lmi_field_name, lmi_words

_MAX_ALTERNATIVES = 4  # a union's members each add one; a few say what is accepted, twenty bury it

# Where vLLM defines its request models: 0.32's per-endpoint modules first, then the older shared one.
_MODEL_HOMES = {
    Schema.COMPLETION: (
        ("vllm.entrypoints.openai.completion.protocol", "CompletionRequest"),
        ("vllm.entrypoints.openai.protocol", "CompletionRequest"),
    ),
    Schema.CHAT: (
        ("vllm.entrypoints.openai.chat_completion.protocol", "ChatCompletionRequest"),
        ("vllm.entrypoints.openai.protocol", "ChatCompletionRequest"),
    ),
}


@dataclass(frozen=True)
class FieldProblem:
    """One field of a body that vLLM's request model refuses."""

    path: str  # as the client wrote it: "messages[0].role", "parameters.seed"
    value: Any
    reason: str  # "expected a valid string", or vLLM's own sentence
    missing: bool = False

    def describe(self) -> str:
        if self.missing:
            return f"{self.path} is missing: {self.reason}"
        return f"{self.path}={shown(self.value)}: {self.reason}"


@functools.cache
def request_model(schema: Schema) -> Any | None:
    """vLLM's pydantic model for a body of this schema; imported on the first refusal, not at load time."""
    for module_name, class_name in _MODEL_HOMES.get(schema, ()):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        model = getattr(module, class_name, None)
        if model is not None:
            return model
    return None


@functools.cache
def completion_fields() -> frozenset[str] | None:
    """Every name vLLM's CompletionRequest takes (fields and their aliases): an LMI parameter outside these and
    LMI's own is refused before vLLM, which would ignore it (entrypoint.lmi.request). None without vLLM."""
    model = request_model(Schema.COMPLETION)
    if model is None:
        return None
    names = set(model.model_fields)
    names.update(field.alias for field in model.model_fields.values() if field.alias)
    return frozenset(names)


def find_problem(body: Mapping[str, Any], schema: Schema, rename: Callable[[str], str] = str) -> FieldProblem | None:
    """The first field of `body` vLLM's request model refuses; `rename` maps a top-level key to the client's name."""
    if schema is Schema.CHAT and not isinstance(body.get("messages"), list):
        # vLLM's chat model iterates "messages" in a validator of its own before pydantic checks the
        # type: null there is a TypeError ("'NoneType' object is not iterable"), not a field error.
        return FieldProblem(rename("messages"), body.get("messages"), "expected a list of message objects")
    model = request_model(schema)
    if model is None:
        return None
    import pydantic  # vLLM's dependency: present wherever the model is

    try:
        model.model_validate(dict(body))
    except pydantic.ValidationError as exc:
        return _first_problem(exc.errors(include_url=False), body, rename)
    except Exception as exc:  # vLLM's validators raise VLLMValidationError(parameter=...), not pydantic's
        parameter = getattr(exc, "parameter", None)
        if not isinstance(parameter, str) or not parameter:
            return None
        value = body.get(parameter, getattr(exc, "value", None))
        return FieldProblem(rename(parameter), value, str(exc.args[0]) if exc.args else str(exc))
    return None


def _first_problem(errors: Sequence[Any], body: Mapping[str, Any], rename: Callable[[str], str]) -> FieldProblem | None:
    if not errors:
        return None
    first = errors[0]
    steps = _body_steps(first, body)
    if not steps:
        return None
    # A union (a message, its content) fails once per member at the same place: say what each accepts.
    accepted: list[str] = []
    others: list[str] = []
    for error in errors:
        if _body_steps(error, body) != steps:
            continue
        reason = _reason(error)
        kind = accepted if reason.startswith("expected ") else others
        reason = reason.removeprefix("expected ")
        if reason not in kind:
            kind.append(reason)
    reasons = ["expected " + " or ".join(accepted[:_MAX_ALTERNATIVES])] if accepted else []
    reasons += others[:_MAX_ALTERNATIVES]
    path = rename(str(steps[0])) + "".join(_step(step) for step in steps[1:])
    missing = first.get("type") == "missing"
    return FieldProblem(path, first.get("input"), "; ".join(reasons), missing=missing)


def _body_steps(error: Mapping[str, Any], body: Mapping[str, Any]) -> list[str | int]:
    """The error's location as keys and indexes of the body.

    pydantic puts a union member's name into the location ('ChatCompletionUserMessageParam', 'str',
    'list[constrained-int]'); those are no place in the body, so a step is kept only where the body
    has it (or, for a missing field, as the last step).
    """
    loc = list(error.get("loc") or ())
    steps: list[str | int] = []
    current: Any = body
    for i, item in enumerate(loc):
        if _holds(current, item):
            current = current[item]
        elif i == len(loc) - 1 and error.get("type") == "missing" and isinstance(item, str):
            pass  # the missing field itself
        else:
            continue  # a union member's name
        steps.append(item)
    return steps


def _holds(value: Any, item: object) -> bool:
    """`value[item]` is a place in the JSON body: a key of an object, an index of an array."""
    if isinstance(value, Mapping):
        return isinstance(item, str) and item in value
    return isinstance(value, list) and isinstance(item, int) and 0 <= item < len(value)


def _step(step: str | int) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    return f".{step}" if step.isidentifier() else f"[{json.dumps(step)}]"


def _reason(error: Mapping[str, Any]) -> str:
    """pydantic's message as what is accepted: "Input should be a valid list" → "expected a valid list"."""
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "missing":
        return "required"
    if message.startswith("Input should be "):
        accepted = message.removeprefix("Input should be ")
        if accepted.startswith(("greater", "less", "a multiple")):
            accepted = "a value " + accepted
        return f"expected {accepted}"
    return message.removeprefix("Value error, ")


# --------------------------------------------------------------------------------------------
# The answers


def lmi_refusal(completion: Mapping[str, Any], status: int, raw: bytes) -> LMIError:
    """vLLM's error for a translated LMI body, in LMI's shape and with the LMI names the client sent."""
    if status == 400:
        problem = find_problem(completion, Schema.COMPLETION, rename=lmi_field_name)
        if problem is not None:
            return LMIError(400, f"Input parsing failed: {problem.describe()}")
    error = vllm_error_to_lmi(status, raw)
    return LMIError(error.code, lmi_words(error.message))


def openai_refusal(body: Mapping[str, Any], schema: Schema) -> dict[str, Any] | None:
    """vLLM's OpenAI error body for a pass-through body, naming the field; None where validation finds nothing."""
    problem = find_problem(body, schema)
    if problem is None:
        return None
    return {"error": {"message": problem.describe(), "type": "BadRequestError", "param": problem.path, "code": 400}}
