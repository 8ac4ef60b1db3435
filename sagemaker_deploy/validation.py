"""Check a request against botocore's service model before it is sent.

botocore's own ParamValidator (on by default) checks required members, types and minimums, but
not maximum lengths, map sizes, string patterns or enums; SageMaker enforces those server-side,
after part of a deployment may already exist. This module checks all of them up front, with the
path of the offending member in the message.
"""

from __future__ import annotations

import re
from typing import Any

import botocore.session
from botocore.exceptions import ParamValidationError
from botocore.model import ListShape, MapShape, Shape, StructureShape
from botocore.validate import ParamValidator

_SESSION = botocore.session.get_session()


class RequestInvalid(ValueError):
    """A request botocore's service model rejects; the message lists every problem."""


def service_model(service: str) -> Any:
    return _SESSION.get_service_model(service)


def enum_values(service: str, shape_name: str) -> tuple[str, ...]:
    return tuple(service_model(service).shape_for(shape_name).enum)


def validate_request(service: str, operation: str, params: dict[str, Any]) -> None:
    """Raise RequestInvalid unless `params` satisfies `service`'s `operation` input shape."""
    shape = service_model(service).operation_model(operation).input_shape
    problems: list[str] = []
    try:
        ParamValidator().validate(params, shape)
    except ParamValidationError as exc:
        problems.append(str(exc.kwargs.get("report", exc)))
    _check(shape, params, operation, problems)
    if problems:
        raise RequestInvalid(f"{service} {operation} request is invalid:\n  " + "\n  ".join(problems))


def _check(shape: Shape, value: Any, path: str, problems: list[str]) -> None:
    meta = shape.metadata
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                _check(member, value[name], f"{path}.{name}", problems)
    elif isinstance(shape, ListShape) and isinstance(value, list):
        _bounds(meta, len(value), path, "entries", problems)
        for index, item in enumerate(value):
            _check(shape.member, item, f"{path}[{index}]", problems)
    elif isinstance(shape, MapShape) and isinstance(value, dict):
        _bounds(meta, len(value), path, "entries", problems)
        for key, item in value.items():
            _check(shape.key, key, f"{path} key {key!r}", problems)
            _check(shape.value, item, f"{path}[{key!r}]", problems)
    elif shape.type_name == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            problems.append(f"{path}={value!r} is not one of the {len(shape.enum)} values of {shape.name}")
        _bounds(meta, len(value), path, "characters", problems)
        pattern = meta.get("pattern")
        if pattern and not _matches(pattern, value):
            problems.append(f"{path}={value!r} does not match the pattern {pattern}")
    elif shape.type_name in ("integer", "long") and isinstance(value, int) and value > meta.get("max", value):
        problems.append(f"{path}={value} is above the maximum {meta['max']}")


def _matches(pattern: str, value: str) -> bool:
    """AWS patterns are anchored; a Java-only construct Python cannot compile is not checked."""
    try:
        return re.fullmatch(pattern, value, flags=re.DOTALL) is not None
    except re.error:
        return True


def _bounds(meta: dict[str, Any], size: int, path: str, unit: str, problems: list[str]) -> None:
    if "max" in meta and size > meta["max"]:
        problems.append(f"{path} has {size} {unit}, more than the maximum {meta['max']}")
