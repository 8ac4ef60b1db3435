"""`python -m entrypoint {resolve,serve,bake-cache,run-local}`: argument parsing and exit codes only."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from entrypoint.resolve.render import render_plan
from entrypoint.utils.errors import ConfigError

EXIT_CONFIG_ERROR = 2
log = logging.getLogger("entrypoint")


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", help="local directory, hub id or s3:// prefix (default: option.model_id, /opt/ml/model)"
    )
    parser.add_argument(
        "--properties", type=Path, help="serving.properties to read (default: the model's, else the image's)"
    )


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
    resolve.add_argument("--num-gpus", type=int, help="number of (simulated or detected) GPUs")
    resolve.add_argument("--vllm-version", help="plan for this vLLM version instead of the installed one")
    resolve.add_argument(
        "--json",
        action="store_true",
        help="one JSON object instead of the table (like the table, secret values such as --api-key are ***)",
    )

    serve = commands.add_parser("serve", help="resolve, fetch the model if remote, and exec vLLM (what the image runs)")
    _model_arguments(serve)
    serve.add_argument("--host", help="bind address (default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="port (default ${SAGEMAKER_BIND_TO_PORT:-8080})")

    bake = commands.add_parser(
        "bake-cache",
        help="start what serve runs once (on 127.0.0.1), send requests of every shape class, stop, and leave the "
        "compile caches it made in --out with a manifest: the image's compile-cache layer (run it on the GPU host)",
    )
    _model_arguments(bake)
    bake.add_argument("--out", type=Path, required=True, help="an empty or new folder for the layer")
    bake.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for /health (default 3600)")

    local = commands.add_parser("run-local", help="serve the embedded tiny MoE model on 127.0.0.1 (CPU engine)")
    local.add_argument("--port", type=int, help="port (default ${SAGEMAKER_BIND_TO_PORT:-8080})")
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


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    try:
        if args.command == "resolve":
            return _resolve(args)
        if args.command == "serve":
            from entrypoint.serve import serve_main

            return serve_main(args)
        if args.command == "bake-cache":
            from entrypoint.bake_cache import bake, bake_plan

            try:
                bake(bake_plan(args.model, args.properties), args.out, args.timeout)
            except (RuntimeError, OSError) as exc:  # BakeFailed and a server error: its own log above says why
                print(f"error: bake-cache: {exc}", file=sys.stderr)
                return 1
            return 0
        from entrypoint.run_local import main as run_local_main

        return run_local_main(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
