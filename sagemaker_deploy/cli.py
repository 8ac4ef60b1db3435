"""`python -m sagemaker_deploy {plan,deploy,update,invoke,delete}`.

Exit codes: 0 success, 1 an AWS-side failure (DeployError), 2 a configuration refused before
anything was sent (ConfigError, like `python -m entrypoint resolve`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from entrypoint.utils.errors import ConfigError
from sagemaker_deploy.actions import delete, deploy, invoke, invoke_stream, lmi_body, update
from sagemaker_deploy.aws import DeployError, make_clients
from sagemaker_deploy.instance_plan import plan_for_instance, plan_json, plan_text
from sagemaker_deploy.prepare import Request, prepare
from sagemaker_deploy.sizing import size_of_local_model, timeouts_for


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sagemaker_deploy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", help="what the container will run on an instance type (no AWS call)")
    plan.add_argument("--instance-type", required=True)
    plan.add_argument("--model", help="local checkpoint directory or hub id (default: option.model_id)")
    plan.add_argument("--properties", type=Path, help="serving.properties to resolve")
    plan.add_argument("--json", action="store_true", help="print `entrypoint resolve --json` keys + instance_type")

    for name, text in (("deploy", "create model, endpoint config and endpoint"),
                       ("update", "new model + config, blue/green UpdateEndpoint")):  # fmt: skip
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--endpoint-name", required=True)
        cmd.add_argument("--instance-type", required=True)
        cmd.add_argument("--image-uri", required=True, help="the image in ECR")
        cmd.add_argument("--role", required=True, help="execution role ARN SageMaker assumes")
        cmd.add_argument("--properties", type=Path, help="serving.properties (env, or beside the weights)")
        cmd.add_argument("--model", help="hub id or s3:// prefix the container downloads at start")
        cmd.add_argument("--model-data", help="uncompressed s3://BUCKET/PREFIX/ mounted at /opt/ml/model")
        cmd.add_argument("--instance-count", type=int, default=1)
        cmd.add_argument("--region")
        cmd.add_argument("--no-wait", action="store_true", help="return once the requests are accepted")
        if name == "deploy":
            cmd.add_argument("--no-smoke", action="store_true", help="skip the smoke request after InService")
        else:
            cmd.add_argument("--keep-old", action="store_true", help="keep the previous model and config")

    inv = sub.add_parser("invoke", help="send one LMI request (optionally streamed)")
    inv.add_argument("--endpoint-name", required=True)
    inv.add_argument("--prompt", default="What is a mixture of experts?")
    inv.add_argument("--max-new-tokens", type=int, default=128)
    inv.add_argument("--body", help="raw JSON body instead of --prompt (any LMI/OpenAI schema)")
    inv.add_argument("--stream", action="store_true", help="InvokeEndpointWithResponseStream, tokens as they come")
    inv.add_argument("--region")

    rm = sub.add_parser("delete", help="delete endpoint, its config and models (missing ones are fine)")
    rm.add_argument("--endpoint-name", required=True)
    rm.add_argument("--region")
    rm.add_argument("--wait", action="store_true", help="wait until the endpoint is gone")
    return parser


def _request(args: argparse.Namespace) -> Request:
    return Request(
        endpoint=args.endpoint_name, instance_type=args.instance_type, image_uri=args.image_uri,
        role_arn=args.role, properties=args.properties, model=args.model, model_data=args.model_data,
        instance_count=args.instance_count,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.command == "plan":
        plan = plan_for_instance(args.instance_type, model=args.model, properties=args.properties)
        if args.json:
            print(json.dumps(plan_json(plan, args.instance_type), indent=2, sort_keys=True))
        else:
            print(plan_text(plan, args.instance_type))
            if args.model and Path(args.model).is_dir():
                size = size_of_local_model(Path(args.model))
                t = timeouts_for(size)
                gb = f"{size.bytes / 1e9:.1f} GB" if size.bytes else "unknown size"
                print(f"sagemaker:   {gb} ({size.source}) → download timeout {t.download_s}s, startup {t.startup_s}s")
        return 0
    clients = make_clients(args.region)
    if args.command in ("deploy", "update"):
        prepared = prepare(_request(args), clients.s3)
        print(plan_text(prepared.plan, args.instance_type), file=sys.stderr)
        print(f"model size: {prepared.size.bytes or 'unknown'} bytes ({prepared.size.source})", file=sys.stderr)
        if args.command == "deploy":
            deploy(prepared, clients, wait=not args.no_wait, smoke=not args.no_smoke)
        else:
            update(prepared, clients, wait=not args.no_wait, keep_old=args.keep_old)
        return 0
    if args.command == "delete":
        delete(clients, args.endpoint_name, wait=args.wait)
        return 0
    body = args.body.encode() if args.body else lmi_body(args.prompt, args.max_new_tokens, args.stream)
    if args.stream:
        invoke_stream(clients, args.endpoint_name, body)
    else:
        print(json.dumps(invoke(clients, args.endpoint_name, body), indent=2, ensure_ascii=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
