"""`python -m entrypoint serve`: resolve the plan, fetch a remote model, then become vLLM.

The process ends in `os.execvpe`, so vLLM's API server *is* the container's main process: SIGTERM
from `docker stop` / SageMaker reaches it directly, and when the engine dies the server exits
non-zero and the container with it (no supervisor: the README's "Shutdown, engine failure, and why no
supervisor" says why). vLLM's CLI is called in-process by `python -m entrypoint.serve serve ...`
(run_vllm_cli), so no console script on PATH is needed (the CPU build's `vllm` script needs a metadata
fix-up) and an engine death exits non-zero.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from entrypoint.caches import model_info
from entrypoint.caches.compile_layer import seed
from entrypoint.resolve.gpu import detect_gpus
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.render import Layout, render_plan
from entrypoint.utils.errors import ConfigError

log = logging.getLogger("entrypoint.serve")

# vLLM's CLI runs inside this module (see run_vllm_cli) so the exit status can report an engine
# death; the process is still vLLM's API server itself, exec'd, with nothing in between.
VLLM_CLI = ("-m", "entrypoint.serve", "serve")
HEADLESS = "--headless"  # a worker node's flag (entrypoint.resolve.multinode)
# Where an s3:// model is synchronised before vLLM starts; resumable across restarts of the
# container as long as the directory survives (mount a volume there to keep it).
DOWNLOAD_DIR_ENV = "MOE_SERVING_DOWNLOAD_DIR"
DEFAULT_DOWNLOAD_DIR = "/tmp/moe-serving/models"


def vllm_command(plan: Plan, python: str = sys.executable) -> list[str]:
    """The argv that runs `vllm serve` with the plan's arguments: a list, never a shell string."""
    return [python, *VLLM_CLI, *plan.vllm_args]


def vllm_environment(plan: Plan, environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: ours, plus the plan's (the plan wins: it is what was resolved)."""
    return {**environ, **plan.env}


def download_dir_for(model: str, environ: Mapping[str, str]) -> Path:
    """A stable local directory per remote URI, so a restart resumes instead of starting over."""
    root = Path(environ.get(DOWNLOAD_DIR_ENV) or DEFAULT_DOWNLOAD_DIR)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model.removeprefix("s3://")).strip("_")[:80]
    digest = hashlib.sha256(model.encode()).hexdigest()[:12]
    return root / f"{readable}-{digest}"


def with_model(plan: Plan, local: str) -> Plan:
    """The plan with its model argument (first element of vllm_args) replaced by a local path."""
    args = list(plan.vllm_args)
    if not args or args[0] != plan.model:
        raise ValueError(f"plan.vllm_args does not start with the model {plan.model!r}: {args[:1]}")
    args[0] = local
    return plan.model_copy(update={"model": local, "vllm_args": tuple(args), "fetch_model": False})


def plan_log_lines(plan: Plan) -> list[str]:
    """The few lines the startup log gives the plan: what runs, on what, and why (secrets as ***)."""
    return render_plan(plan, Layout.LINES).splitlines()


def fetch_if_remote(plan: Plan, environ: Mapping[str, str]) -> Plan:
    if not plan.fetch_model:
        return plan
    from entrypoint.model.sources import download_model

    dest = download_dir_for(plan.model, environ)
    log.info("fetching %s into %s (resumes a partial download)", plan.model, dest)
    local = download_model(plan.model, dest, environ=environ)
    return with_model(plan, str(local))


def run_vllm_cli(args: list[str]) -> int:
    """`vllm <args>` in this process (vLLM 0.26 and 0.32 both have vllm.entrypoints.cli.main.main).

    vLLM exits 0 both after SIGTERM and when its engine died; the middleware, loaded in this same
    process, tells the two apart and the death becomes a non-zero exit status.
    """
    from vllm.entrypoints.cli.main import main as vllm_main

    from entrypoint.lmi.lifecycle import ENGINE_DIED_EXIT_CODE, exit_code

    sys.argv = ["vllm", *args]
    vllm_main()
    if HEADLESS in args:
        # A worker node has no API server and so no middleware to tell a stop from a death. vLLM's headless path
        # (vllm/entrypoints/cli/serve.py run_headless) turns SIGTERM/SIGINT into SystemExit, which never gets here; it
        # returns only once one of its engines exited.
        print("error: a headless worker's engine exited without a stop signal (docs/deployment.md#multi-node)",
              file=sys.stderr, flush=True)  # fmt: skip
        return ENGINE_DIED_EXIT_CODE
    return exit_code()


# Where serve writes the node's role (single, head, worker) at each start, for docker/healthcheck.sh: a worker runs
# vLLM headless, with no HTTP server, so the image's health check looks at its engine processes instead of /ping.
ROLE_FILE_ENV = "MOE_SERVING_ROLE_FILE"
DEFAULT_ROLE_FILE = "/tmp/moe-serving/node-role"


def write_role_file(plan: Plan, environ: Mapping[str, str]) -> str:
    """Record the plan's node role where the health check reads it; the log line says where (or why not)."""
    path = Path(environ.get(ROLE_FILE_ENV) or DEFAULT_ROLE_FILE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(plan.node_role + "\n")
    except OSError as exc:
        return f"node role: {plan.node_role}, not recorded for the health check ({exc}; docs/deployment.md#multi-node)"
    return f"node role: {plan.node_role}, recorded in {path} for the health check (docs/deployment.md#multi-node)"


# Set by the image (Dockerfile, base stage): which engine it carries.
FLAVOUR_ENV = "MOE_SERVING_FLAVOUR"


def require_a_gpu_in_the_cuda_image(environ: Mapping[str, str], gpus: GpuInventory) -> None:
    """The CUDA image started without `--gpus` sees no GPU: refuse in one line, before any model is read or vLLM
    is imported (vLLM would otherwise fail minutes later with a traceback about a missing driver)."""
    if environ.get(FLAVOUR_ENV) == "cuda" and gpus.is_cpu:
        raise ConfigError(
            "GPUs",
            "none",
            f"the CUDA image sees no NVIDIA GPU ({gpus.source.removeprefix('none:')}): start the container with "
            "`docker run --gpus all` (NVIDIA container toolkit), or use the cpu image",
        )


def serve_main(ns: argparse.Namespace) -> NoReturn:
    """Resolve, fetch, log the plan, and exec vLLM. ConfigError propagates (the CLI exits 2)."""
    from entrypoint.inputs.gather import build_plan

    require_a_gpu_in_the_cuda_image(os.environ, detect_gpus())
    plan = build_plan(model=ns.model, properties=ns.properties, host=ns.host, port=ns.port)
    plan = fetch_if_remote(plan, os.environ)
    for line in plan_log_lines(plan):
        log.info("%s", line)
    argv = vllm_command(plan)
    env = vllm_environment(plan, os.environ)
    log.info("%s", write_role_file(plan, env))
    log.info("%s", seed(plan, env))
    # after the compile-cache layer, which is seeded only into an empty VLLM_CACHE_ROOT (and holds these entries)
    log.info("%s", model_info.seed(env))
    # exec replaces this process: anything still buffered would be lost.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, env)


if __name__ == "__main__":
    sys.exit(run_vllm_cli(sys.argv[1:]))
