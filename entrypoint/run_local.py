"""`make run` → `python -m entrypoint run-local [--port P]`: the embedded default without a GPU.

Generates the tiny Qwen3-MoE checkpoint once (entrypoint.model.tiny_model), sets the CPU engine's
environment defaults, prints a few requests to try, and then takes exactly the path the image's
`serve` takes — resolver, plan, `vllm serve --middleware ...` — on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import MutableMapping
from pathlib import Path
from typing import NoReturn

from entrypoint.model.tiny_model import ensure_tiny_model
from entrypoint.serve import serve_main

TINY_MODEL_DIR_ENV = "MOE_SERVING_TINY_MODEL_DIR"
LOCAL_HOST = "127.0.0.1"

# The CPU engine's settings (docs/reference/cpu-vllm.md): 1 GiB of KV cache is plenty
# for a 512-token context; no usage reporting and no hub look-ups for a model made on this machine.
CPU_ENV_DEFAULTS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
}


def tiny_model_dir(environ: MutableMapping[str, str]) -> Path:
    """The checkout's git-ignored .artifacts/, else the user cache (an installed package is read-only)."""
    if environ.get(TINY_MODEL_DIR_ENV):
        return Path(environ[TINY_MODEL_DIR_ENV])
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / ".artifacts" / "tiny-moe"
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "moe-serving" / "tiny-moe"


def apply_cpu_defaults(environ: MutableMapping[str, str]) -> list[str]:
    """Set each default the user has not set; returns the names that were set here."""
    applied = []
    for name, value in CPU_ENV_DEFAULTS.items():
        if name not in environ:
            environ[name] = value
            applied.append(name)
    return applied


def try_lines(port: int) -> list[str]:
    base = f"http://{LOCAL_HOST}:{port}"
    json_header = "-H 'Content-Type: application/json'"
    requests = [
        (
            "LMI / TGI schema",
            '{"inputs": "What is a mixture of experts?", "parameters": {"max_new_tokens": 16, "details": true}}',
            "",
        ),
        (
            "LMI streaming (jsonlines)",
            '{"inputs": "Tell me a story", "parameters": {"max_new_tokens": 16}, "stream": true}',
            "-N ",
        ),
        ("OpenAI chat on /invocations", '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16}', ""),
    ]
    lines = [f"curl {base}/ping"]
    for title, body, flags in requests:
        lines.append(f"# {title}")
        lines.append(f"curl {flags}{base}/invocations {json_header} -d {shlex.quote(body)}")
    lines.append("# OpenAI completions (vLLM's own route, no model name needed)")
    lines.append(f'curl {base}/v1/completions {json_header} -d \'{{"prompt": "Hello", "max_tokens": 16}}\'')
    return lines


def main(ns: argparse.Namespace) -> NoReturn:
    model_dir = ensure_tiny_model(tiny_model_dir(os.environ))
    applied = apply_cpu_defaults(os.environ)
    port = ns.port or int(os.environ.get("SAGEMAKER_BIND_TO_PORT") or 8080)
    print(f"tiny MoE model: {model_dir}")
    if applied:
        print("CPU engine defaults: " + " ".join(f"{name}={os.environ[name]}" for name in applied))
    print(f"serving on http://{LOCAL_HOST}:{port} once vLLM reports ready (~15-35 s). Try:")
    for line in try_lines(port):
        print("  " + line)
    print(flush=True)
    serve_args = argparse.Namespace(model=str(model_dir), properties=None, host=LOCAL_HOST, port=port)
    serve_main(serve_args)
