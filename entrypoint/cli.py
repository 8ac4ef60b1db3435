"""`python -m entrypoint {resolve,serve,bake-cache,run-local}`: argument parsing and exit codes only."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from entrypoint.resolve.render import render_plan
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.ports import PORT_RANGE, parse_port

EXIT_CONFIG_ERROR = 2
log = logging.getLogger("entrypoint")


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", help="local directory, hub id or s3:// prefix (default: option.model_id, /opt/ml/model)"
    )
    parser.add_argument(
        "--properties", type=Path, help="serving.properties to read (default: the model's, else the image's)"
    )


def _tune_arguments(parser: argparse.ArgumentParser, default: str, about: str) -> None:
    from entrypoint.caches.tune_defaults import DEFAULT_BUDGET_S, MODES

    parser.add_argument("--tune", default=default, help=f"{', '.join(MODES)} (default {default}; {about})")
    parser.add_argument(
        "--tune-budget-s",
        type=_positive_seconds,
        default=DEFAULT_BUDGET_S,
        help=f"seconds the tune may take in all (default {DEFAULT_BUDGET_S:.0f}); a killed tune resumes",
    )


# argparse types: a bad value is argparse's usage error (exit 2, the argument and value named), not a traceback later
def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a whole number >= 1")
    return int(text)


def _tcp_port(text: str) -> int:
    port = parse_port(text)
    if port is None:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a TCP port, {PORT_RANGE}")
    return port


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text) if text.isascii() else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a finite number of seconds > 0, e.g. 240")
    return seconds


def _vllm_version(text: str) -> str:
    from entrypoint.resolve.vllm_caps import parse_version

    try:
        parse_version(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted: a vLLM version such as 0.32.0") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m entrypoint", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    resolve = commands.add_parser(
        "resolve",
        help="print the vLLM plan for a model on a GPU, without running it (secret values such as --api-key, "
        "--hf-token and HF_TOKEN are printed as ***)",
    )
    _model_arguments(resolve)
    resolve.add_argument("--gpu", help="simulate a GPU: H200, H100, B200, A100, L40S, A10G, L4, sm_XY or cpu")
    resolve.add_argument("--num-gpus", type=_positive_int, help="number of (simulated or detected) GPUs")
    resolve.add_argument(
        "--vllm-version", type=_vllm_version, help="plan for this vLLM version instead of the installed one"
    )
    resolve.add_argument(
        "--json",
        action="store_true",
        help="one JSON object instead of the table (like the table, secret values such as --api-key are ***)",
    )

    serve = commands.add_parser("serve", help="resolve, fetch the model if remote, and exec vLLM (what the image runs)")
    _model_arguments(serve)
    serve.add_argument("--host", help="bind address (default 0.0.0.0)")
    serve.add_argument("--port", type=_tcp_port, help="port (default ${SAGEMAKER_BIND_TO_PORT:-8080})")

    bake = commands.add_parser(
        "bake-cache",
        help="start what serve runs once (on 127.0.0.1), send requests of every shape class, stop, and leave the "
        "compile caches it made in --out with a manifest: the image's compile-cache layer (run it on the GPU host)",
    )
    _model_arguments(bake)
    bake.add_argument("--out", type=Path, required=True, help="an empty or new folder for the layer")
    bake.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for /health (default 3600)")
    _tune_arguments(bake, "auto", "auto: tune on a GPU when the plan runs vLLM's Triton MoE on an FP8 checkpoint")

    tune = commands.add_parser(
        "tune",
        help="tune the plan's MoE kernels on this GPU into --out/tuned (what bake-cache does first; no server start)",
    )
    _model_arguments(tune)
    tune.add_argument("--out", type=Path, required=True, help="the layer folder; the tuned files go to OUT/tuned")
    tune.add_argument("--gpu", help="the GPU the plan is for, when NVML does not answer here (H200, H100, ...)")
    _tune_arguments(tune, "on", "on: refuse without a GPU")

    local = commands.add_parser("run-local", help="serve the embedded tiny MoE model on 127.0.0.1 (CPU engine)")
    local.add_argument("--port", type=_tcp_port, help="port (default ${SAGEMAKER_BIND_TO_PORT:-8080})")
    return parser


def _resolve(args: argparse.Namespace) -> int:
    from entrypoint.inputs.gather import build_plan

    plan = build_plan(
        model=args.model,
        properties=args.properties,
        gpu=args.gpu,
        num_gpus=args.num_gpus,
        vllm_version=args.vllm_version,
    )
    print(plan.to_json() if args.json else render_plan(plan))
    return 0


def _command(argv: Sequence[str] | None) -> str:
    return "python -m entrypoint " + " ".join(argv if argv is not None else sys.argv[1:])


def _tune(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from entrypoint.bake_cache import tune_step
    from entrypoint.caches.tune_layer import summary_lines

    _, outcome = tune_step(args, "tune", _command(argv), gpu=args.gpu)
    if outcome is not None:
        print("\n".join(summary_lines(outcome)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    try:
        if args.command == "resolve":
            return _resolve(args)
        if args.command == "serve":
            from entrypoint.serve import serve_main

            return serve_main(args)
        if args.command == "tune":
            return _tune(args, argv)
        if args.command == "bake-cache":
            from entrypoint.bake_cache import bake, tune_then_plan

            try:
                bake(tune_then_plan(args, _command(argv)), args.out, args.timeout)
            except (RuntimeError, OSError) as exc:  # BakeFailed and a server error: its own log above says why
                print(f"error: bake-cache: {exc}", file=sys.stderr)
                return 1
            return 0
        from entrypoint.run_local import main as run_local_main

        return run_local_main(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
