"""`--option KEY=VALUE`: LMI options for the served rows, given to the server as a SageMaker user gives them.

Each option becomes `OPTION_<KEY>` in the environment the plan is resolved from (entrypoint.inputs.gather.build_plan),
for every backend row of the run, exactly as `option.<key>` in serving.properties or `OPTION_<KEY>` on an endpoint
would: `--option tensor_parallel_degree=4`, `--option enable_expert_parallel=true`. Only the key's shape is checked
here; the resolver validates the value (and ignores unknown keys with a reason line, which `--dry-run` prints).
Keys the harness sets itself, or that would change what the comparison rows compare, are refused.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping

KEY_SHAPE = re.compile(r"[a-z][a-z0-9_]*")
PREFIX = "option."
# Set by the harness from its own flags (served.bench_options): one source for each.
HARNESS_KEYS = {
    "load_format": "the harness loads random weights (load_format=dummy)",
    "max_model_len": "the harness sizes it from the workloads",
    "max_rolling_batch_size": "the harness sets it to the largest concurrency (or --max-num-seqs)",
    "max_num_seqs": "the harness sets it to the largest concurrency (or --max-num-seqs)",
    "gpu_memory_utilization": "use --gpu-memory-utilization",
    "compilation_config": "use --compile",
    "moe_backend": "the rows differ in the MoE backend only: choose them with --backends",
    "model_id": "use --models",
}


def parse_option(text: str) -> tuple[str, str]:
    """'tensor_parallel_degree=4' (or 'option.tensor_parallel_degree=4') → ('tensor_parallel_degree', '4')."""
    key, sep, value = text.partition("=")
    key = key.strip().removeprefix(PREFIX)
    if not sep:
        raise argparse.ArgumentTypeError(f"--option {text!r}: expected KEY=VALUE, e.g. tensor_parallel_degree=4")
    if not KEY_SHAPE.fullmatch(key):
        raise argparse.ArgumentTypeError(
            f"--option {text!r}: the key {key!r} is not an LMI option name (lower case letters, digits and _, "
            "starting with a letter, e.g. tensor_parallel_degree or enable_expert_parallel)"
        )
    if key in HARNESS_KEYS:
        raise argparse.ArgumentTypeError(f"--option {text!r}: {key} is not accepted here: {HARNESS_KEYS[key]}")
    if not value.strip():
        raise argparse.ArgumentTypeError(f"--option {text!r}: the value is empty")
    return key, value.strip()


def collect(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The --option pairs in order; a key given twice with two values is an error, not a silent last-wins."""
    options: dict[str, str] = {}
    for key, value in pairs:
        if options.get(key, value) != value:
            raise ValueError(f"--option {key}: given twice ({options[key]!r} and {value!r})")
        options[key] = value
    return options


def as_environment(options: Mapping[str, str]) -> dict[str, str]:
    """{'tensor_parallel_degree': '4'} → {'OPTION_TENSOR_PARALLEL_DEGREE': '4'}."""
    return {f"OPTION_{key.upper()}": value for key, value in options.items()}


def label(options: Mapping[str, str]) -> str:
    """The CSV's `options` column: 'enable_expert_parallel=true;tensor_parallel_degree=8' (sorted), '' for none."""
    return ";".join(f"{key}={options[key]}" for key in sorted(options))
