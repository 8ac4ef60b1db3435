"""Where the compile-cache layer keeps what `make cache-layer` made, as the planning side finds it (issue 32).

The layer (entrypoint.caches.compile_layer, docker/cache-layer.Dockerfile) sits at the path `LAYER_ENV` names. Next
to its compile caches it may hold a `tuned/` folder: Triton MoE tile files under vLLM's names with their
`provenance.json` (kernels/config_files.py's format), and a dispatch table for our kernel
(`fused_moe_dispatch.json`, kernels/dispatch.py's format: the image's rows with this host's rows in place of theirs).
Those were measured on the GPU the layer was baked on, so they come before what the image ships; a user's own
`VLLM_TUNED_CONFIG_FOLDER` or `MOE_SERVING_DISPATCH_TABLE` comes before both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

LAYER_ENV = "MOE_BAKED_COMPILE_CACHE"  # where the image keeps the layer (docker/cache-layer.Dockerfile)
TUNED_FOLDER = "tuned"
TUNED_DISPATCH_FILE = "fused_moe_dispatch.json"


def layer_tuned_dir(environ: Mapping[str, str]) -> Path | None:
    """The layer's folder of tuned files when the layer is there and has one, else None."""
    where = environ.get(LAYER_ENV)
    if not where:
        return None
    folder = Path(where) / TUNED_FOLDER
    return folder if folder.is_dir() else None


def layer_dispatch_table(environ: Mapping[str, str]) -> Path | None:
    """The layer's dispatch table when there is one, else None."""
    folder = layer_tuned_dir(environ)
    return folder / TUNED_DISPATCH_FILE if folder is not None and (folder / TUNED_DISPATCH_FILE).is_file() else None
