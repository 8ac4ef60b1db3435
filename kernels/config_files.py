"""Tuned-config files for vLLM's Triton fused-MoE kernel: naming, parsing, validation, writing.

The lookup this mirrors is vLLM's ``get_config_file_name`` + ``get_moe_configs``
(vllm/model_executor/layers/fused_moe/fused_moe.py; identical in 0.26 and 0.32):

    E={E},N={N},device_name={name}[,dtype={dtype}][,block_shape=[bn,bk]].json

looked up in ``VLLM_TUNED_CONFIG_FOLDER`` first, then in vLLM's own configs/. Any device whose name
contains the token ``H200`` (NVIDIA_H200, NVIDIA_H200_NVL, ...) is mapped to ``NVIDIA_H200``.
The JSON maps batch size M (as a string) → tile; vLLM pops the one extra top-level key
``triton_version`` and turns every other key into ``int`` — any other extra key breaks the load,
and every key inside a tile is passed to the kernel launch as a keyword, so tiles must hold exactly
the kernel's tuning parameters. vLLM picks the entry whose M is closest to the batch size.

Provenance that vLLM cannot carry (vLLM version, GPU, date, command, which M were measured) lives in
``configs/provenance.json`` next to the files; vLLM ignores that name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
PROVENANCE_FILE = CONFIG_DIR / "provenance.json"
# The batch sizes M every shipped tile file holds an entry for (tools/tune.py tunes them; vLLM picks the nearest).
M_GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096)
H200_FILE_DEVICE = "NVIDIA_H200"

# Exactly the keys a tile may hold: vLLM splats the tile into fused_moe_kernel[grid](..., **config).
TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
_POW2 = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
_NAME_RE = re.compile(
    r"^E=(?P<E>\d+),N=(?P<N>\d+),device_name=(?P<device>[^,]+)"
    r"(?:,dtype=(?P<dtype>[a-z0-9_]+))?(?:,block_shape=\[(?P<bn>\d+),(?P<bk>\d+)\])?\.json$"
)

Tile = dict[str, int]
Table = dict[int, Tile]


def file_device_name(device_name: str) -> str:
    """vLLM's device part of the name: spaces and slashes → ``_``; any H200 variant → NVIDIA_H200."""
    name = re.sub(r"[\s/]+", "_", device_name)
    return H200_FILE_DEVICE if "H200" in name.split("_") else name


def config_file_name(
    e: int, n: int, dtype: str | None, block_shape: list[int] | None = None, device_name: str = "NVIDIA H200"
) -> str:
    """Same string vLLM's ``get_config_file_name`` (0.26 and 0.32) builds on a GPU called ``device_name``."""
    dtype_part = f",dtype={dtype}" if dtype else ""
    block_part = f",block_shape=[{block_shape[0]},{block_shape[1]}]" if block_shape and all(block_shape) else ""
    return f"E={e},N={n},device_name={file_device_name(device_name)}{dtype_part}{block_part}.json"


def parse_config_file_name(name: str) -> dict[str, Any]:
    """Inverse of :func:`config_file_name`; ValueError quoting the name when it is not vLLM's pattern."""
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(
            f"{name!r} is not a vLLM MoE config name; expected "
            "'E={E},N={N},device_name={dev}[,dtype={dtype}][,block_shape=[bn,bk]].json'"
        )
    block = [int(m["bn"]), int(m["bk"])] if m["bn"] else None
    return {"E": int(m["E"]), "N": int(m["N"]), "device": m["device"], "dtype": m["dtype"], "block_shape": block}


def parse_config_json(raw: Mapping[str, Any]) -> Table:
    """What vLLM's ``get_moe_configs`` returns for this JSON (same two steps, same errors)."""
    data = dict(raw)
    data.pop("triton_version", None)
    return {int(k): v for k, v in data.items()}


def swap_ab_engaged(tile: Mapping[str, int]) -> bool:
    """vLLM ≥0.25 ``enable_swap_ab`` on SM90 for fp8_w8a8: BLOCK_SIZE_M < 64 and BLOCK_SIZE_N ≥ 64."""
    return tile["BLOCK_SIZE_M"] < 64 and tile["BLOCK_SIZE_N"] >= 64


def smem_bytes(tile: Mapping[str, int], elem_bytes: int = 1) -> int:
    """Shared memory of the software pipeline: one A and one B tile per stage (FP8 = 1 byte)."""
    per_stage = (tile["BLOCK_SIZE_M"] + tile["BLOCK_SIZE_N"]) * tile["BLOCK_SIZE_K"] * elem_bytes
    return per_stage * tile["num_stages"]


# H200 (sm_90): 227 KiB usable shared memory per block; keep headroom for the epilogue/layout conversions.
SMEM_LIMIT = 200 * 1024


def tile_problems(tile: Mapping[str, Any], block_shape: list[int] | None = None) -> list[str]:
    """Reasons this tile would break vLLM's load or the kernel; empty when it is fine."""
    problems = []
    keys = set(tile)
    if keys != set(TILE_KEYS):
        missing, extra = sorted(set(TILE_KEYS) - keys), sorted(keys - set(TILE_KEYS))
        problems.append(f"tile keys must be exactly {list(TILE_KEYS)} (missing {missing}, extra {extra})")
        return problems
    for k in TILE_KEYS:
        v = tile[k]
        if not isinstance(v, int) or isinstance(v, bool):
            problems.append(f"{k}={v!r} must be an int")
        elif k.startswith("BLOCK_SIZE") and v not in _POW2:
            problems.append(f"{k}={v!r} must be a power-of-two int (tl.arange needs it)")
    if problems:
        return problems
    # vLLM's own shipped H200 block-FP8 file (E=256,N=256) uses BLOCK_SIZE_M=8 at M=2 and 4, and it
    # compiles and runs on Triton 3.6 (seen on the H200, 2026-11-29): Triton pads the dot. 8 is the floor.
    if not 8 <= tile["BLOCK_SIZE_M"] <= 256:
        problems.append(f"BLOCK_SIZE_M={tile['BLOCK_SIZE_M']} outside 8..256")
    if not 16 <= tile["BLOCK_SIZE_N"] <= 256:
        problems.append(f"BLOCK_SIZE_N={tile['BLOCK_SIZE_N']} outside 16..256")
    if not 32 <= tile["BLOCK_SIZE_K"] <= 256:
        problems.append(f"BLOCK_SIZE_K={tile['BLOCK_SIZE_K']} outside 32..256 (FP8 dot needs K≥32)")
    if tile["GROUP_SIZE_M"] < 1:
        problems.append(f"GROUP_SIZE_M={tile['GROUP_SIZE_M']} must be ≥ 1")
    if tile["num_warps"] not in (4, 8):
        problems.append(f"num_warps={tile['num_warps']} not in (4, 8)")
    if not 2 <= tile["num_stages"] <= 5:
        problems.append(f"num_stages={tile['num_stages']} outside 2..5")
    # vLLM clamps BLOCK_SIZE_K to the quant block; one scale per K step needs the tile inside a block.
    if block_shape and block_shape[1] % tile["BLOCK_SIZE_K"]:
        problems.append(f"BLOCK_SIZE_K={tile['BLOCK_SIZE_K']} must divide block_shape[1]={block_shape[1]}")
    if smem_bytes(tile) > SMEM_LIMIT:
        problems.append(f"pipeline needs {smem_bytes(tile)} B shared memory > {SMEM_LIMIT}")
    return problems


def validate_table(table: Mapping[int, Mapping[str, Any]], block_shape: list[int] | None = None) -> list[str]:
    """Problems of a whole parsed file, each prefixed with its M."""
    if not table:
        return ["no batch-size entries"]
    out = []
    for m, tile in sorted(table.items()):
        if m < 1:
            out.append(f"M={m}: batch size must be ≥ 1")
        out.extend(f"M={m}: {p}" for p in tile_problems(tile, block_shape))
    return out


def lookup(table: Mapping[int, Tile], m: int) -> Tile:
    """vLLM's choice for batch size m: the entry with the closest M (first on ties, like min())."""
    return table[min(table.keys(), key=lambda x: abs(x - m))]


def write_config_file(path: Path, table: Mapping[int, Mapping[str, int]], triton_version: str) -> None:
    """Write in vLLM's layout: ``triton_version`` first, then M ascending, tile keys in TILE_KEYS order."""
    problems = validate_table(table)
    if problems:
        raise ValueError(f"refusing to write {path.name}: " + "; ".join(problems))
    body: dict[str, Any] = {"triton_version": triton_version}
    for m in sorted(table):
        body[str(m)] = {k: int(table[m][k]) for k in TILE_KEYS}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(body, indent=4) + "\n")
    tmp.replace(path)


def read_config_file(path: Path) -> Table:
    return parse_config_json(json.loads(path.read_text()))


def shipped_files(config_dir: Path = CONFIG_DIR) -> list[Path]:
    """Every tuned file the image ships (the provenance sidecar is not one)."""
    return sorted(p for p in config_dir.glob("*.json") if p.name != PROVENANCE_FILE.name)


def foreign_files(config_dir: Path = CONFIG_DIR) -> list[str]:
    """Names in the folder that are neither a fused-MoE tile file nor its README / provenance. vLLM 0.32 reads
    VLLM_TUNED_CONFIG_FOLDER for Mamba's selective_state_update configs and the LoRA kernels' configs too
    (docs/kernels.md, "What else vLLM 0.32 reads from that folder"): such a file would change another kernel."""
    foreign = []
    for path in sorted(config_dir.iterdir()):
        if path.name in ("README.md", PROVENANCE_FILE.name):
            continue
        try:
            parse_config_file_name(path.name)
        except ValueError:
            foreign.append(path.name)
    return foreign


def load_provenance(path: Path = PROVENANCE_FILE) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else {}


def save_provenance(entries: Mapping[str, Mapping[str, Any]], path: Path = PROVENANCE_FILE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=2) + "\n")
