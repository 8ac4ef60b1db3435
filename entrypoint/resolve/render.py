"""The one place that says what a plan shows; the layouts only arrange it.

`resolve` prints the table, `serve` logs the lines, `sagemaker_deploy plan`/`deploy` print the
table with their instance row first. Every layout starts from `plan.redacted()`: secret values
(--api-key, --hf-token, HF_TOKEN, ...) are *** in all of them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from enum import StrEnum

from entrypoint.resolve.plan import Plan


class Layout(StrEnum):
    TABLE = "table"  # aligned rows, then the reasons as a list (resolve, sagemaker_deploy)
    LINES = "lines"  # one "label: value" line each, for a log (serve)


# The log's word for the command: the process execs it next.
_LINE_LABELS = {"command": "exec"}


def plan_rows(plan: Plan) -> list[tuple[str, str]]:
    """(label, value) of everything a plan shows besides its reasons, secrets already hidden."""
    shown = plan.redacted()
    backend = (
        f"{shown.moe_backend} (source: {shown.moe_backend_source}; "
        f"runs: {shown.effective_moe_backend or 'dense model'}; kernels: {shown.moe_kernel})"
    )
    return [
        ("model", shown.model),
        ("gpu", shown.gpu.line()),
        ("quantization", shown.quantization.summary()),
        ("moe backend", backend),
        ("vllm", f"{shown.vllm_version} ({shown.vllm_version_source})"),
        # shell-quoted: a value with spaces or `;` (option values are argv elements, never shell text) must not
        # become a different command when someone pastes the line into a shell
        ("env", " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.env.items())) or "-"),
        ("command", shlex.join(["vllm", "serve", *shown.vllm_args])),
    ]


def render_plan(plan: Plan, layout: Layout = Layout.TABLE, *, first_rows: Sequence[tuple[str, str]] = ()) -> str:
    """The plan in `layout`; `first_rows` are the caller's own (label, value) rows shown before the plan's."""
    rows = [*first_rows, *plan_rows(plan)]
    shown = plan.redacted()
    if layout is Layout.LINES:
        lines = [f"{_LINE_LABELS.get(label, label)}: {value}" for label, value in rows]
        lines += [f"reason: {reason}" for reason in shown.reasons]
        lines += [f"ignored: {item}" for item in shown.ignored_options]
        return "\n".join(lines)
    width = max(len(label) for label, _ in rows)
    lines = [f"{label.ljust(width)}  {value}" for label, value in rows]
    lines += ["", "reasons:"] + [f"  - {reason}" for reason in shown.reasons]
    if shown.ignored_options:
        lines += ["ignored:"] + [f"  - {item}" for item in shown.ignored_options]
    return "\n".join(lines)
