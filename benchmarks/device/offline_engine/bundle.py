"""The offline engine bundle for the H200 device host: which packages travel, what is pruned, and the pieces.

The host (no network; Python 3.12, torch 2.11 cu130 with its nvidia-* wheels, triton 3.6, transformers 5.17) gets the
cuda image's engine at exactly the image's pins (docker/cuda-constraints.txt): torch, triton, vllm, flashinfer-python
and transformers always travel; another lock package travels when the host lacks it, or when a travelling package's
requirement excludes the host's version (host_packages.txt; a version not listed there is the old lock's,
6b1130f:docker/cuda-constraints.txt, which was resolved for the host's torch 2.11 stack). The nvidia-* CUDA libraries
travel by symbol verdict (symcheck.py), not by pip metadata. SKIPPED lists what serving on an H200 never imports.

An upload carries the tracked tree and one folder, 64 MiB together: the compressed bundle is split into pieces
that fit beside the tree with a margin, one folder each (.offline/pNN). build_bundle.sh drives the steps:

    python -m benchmarks.device.offline_engine.bundle select --out STAGE/selection.json
    python -m benchmarks.device.offline_engine.bundle prune STAGE/site
    python -m benchmarks.device.offline_engine.bundle stage --bundle STAGE/engine.tar.xz --dest .offline
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
LOCK = REPO / "docker" / "cuda-constraints.txt"
OLD_LOCK_REV = "6b1130f"  # the lock resolved for torch 2.11 / vLLM 0.26: the host's stack
HOST_PACKAGES = HERE / "host_packages.txt"
MIB = 1024 * 1024
TRANSFER_LIMIT = 64 * MIB  # what one upload to the host carries: the tracked tree + one folder
BLOCK = 4096  # what a file occupies on disk, rounded up: the upload's size check counts these
MARGIN = 1 * MIB  # the tree grows between the build and the uploads; folders also hold SHA256SUMS
BUNDLE_NAME = "engine.tar.xz"
PIECE_PREFIX = f"{BUNDLE_NAME}.part"

# Always travel: the engine itself (the goal's versions).
ENGINE = ("torch", "triton", "vllm", "flashinfer-python", "transformers")

# The CUDA library wheels: decided by symcheck.py (symbols torch/vLLM/FlashInfer import against what the host's
# older versions export), never by pip metadata (torch pins them with ==).
NVIDIA_LIBS = (
    "nvidia-cublas",
    "nvidia-cudnn-cu13",
    "nvidia-nccl-cu13",
    "nvidia-cusparselt-cu13",
    "nvidia-nvshmem-cu13",
    "nvidia-cufile",
    "nvidia-cuda-cupti",
    "nvidia-cuda-nvrtc",
    "nvidia-curand",
    "nvidia-cufft",
    "nvidia-cusolver",
    "nvidia-cusparse",
    "nvidia-nvjitlink",
    "nvidia-cuda-runtime",
)

# Lock packages the host lacks that serving on an H200 never loads (checked against vLLM 0.32.0's source and an
# import probe of the serve path on Python 3.12; README.md says how). name -> why.
SKIPPED = {
    # CUDA's compiler as wheels: the image lays them out as CUDA_HOME for FlashInfer's JIT; the host has nvcc 13.0
    "nvidia-cuda-nvcc": "nvcc: the host has CUDA 13.0's (FlashInfer JIT uses the host's CUDA_HOME)",
    "nvidia-cuda-crt": "nvcc's headers: with nvcc, the host has them",
    "nvidia-nvvm": "nvcc's back end: with nvcc, the host has it",
    "nvidia-cuda-cccl": "CUDA C++ core libraries headers: the host's CUDA toolkit has them",
    # MLA-only (DeepSeek-style attention); vLLM imports them inside the MLA backends only
    "tokenspeed-mla": "MLA attention only (vllm/v1/attention/backends/mla/tokenspeed_mla.py imports it lazily)",
    "tokenspeed-triton": "tokenspeed-mla's own Triton fork",
    # media: video/audio decoding for multimodal models, imported lazily
    "pynvvideocodec": "video decoding for multimodal inputs (vllm/multimodal/media, lazy)",
    "torchcodec": "audio/video decoding for multimodal inputs (lazy)",
    # DeepSeek-V4-only and loader/transport extras (vLLM imports each under a has_*() check or inside the one
    # function that needs it)
    "tilelang": "DeepSeek-V4 hyper-connection kernels only (vllm/tilelang_utils, has_tilelang())",
    "z3-solver": "tilelang's solver",
    "nccl-extensions": "FlashInfer's expert-parallel NCCL transport (flashinfer/moe_ep) and vLLM's weight transfer",
    "nccl4py": "with nccl-extensions",
    "instanttensor": "load_format=instanttensor only (weight_utils imports it inside its iterator)",
    "fastsafetensors": "load_format=fastsafetensors only (weight_utils: try-import, unused otherwise)",
    "nvidia-cudnn-frontend": "FlashInfer's cuDNN attention backends only (flashinfer/cudnn: try-import); FA3 serves",
    "nvidia-cutlass-dsl-libs-cu12": "the CuTe DSL's CUDA 12 flavour: the host's CUDA 13 driver picks the cu13 one",
    # AWS / SageMaker / FastAPI tooling that `vllm serve` never imports
    "boto3": "S3 model download only (entrypoint/model/s3.py, lazy); not vLLM's serve path",
    "botocore": "with boto3",
    "s3transfer": "with boto3",
    "supervisor": "model-hosting-container-standards' process supervisor for SageMaker images, not imported",
    "fastapi-cli": "the `fastapi` command (fastapi[standard]); vLLM runs uvicorn itself",
    "fastapi-cloud-cli": "the `fastapi cloud` command",
    "rich-toolkit": "fastapi-cli's",
    "rignore": "fastapi-cloud-cli's",
    "fastar": "fastapi-cloud-cli's",
    "sentry-sdk": "fastapi-cloud-cli's",
    "agent-detector": "fastapi-cloud-cli's",
    "detect-installer": "fastapi-cloud-cli's",
}

# Files and folders removed from the staged site (relative to it): what an H200 serving FP8 MoE through the Triton
# and FlashInfer CUTLASS backends with FA3 attention never loads. path -> why. (Triton's AMD backend stays: Triton 3.7
# imports every backend its entry points name, amd included.)
PRUNED = {
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so": "FlashAttention 2: Hopper runs FA3 (_vllm_fa3_C)",
    "vllm/vllm-rs": "vLLM's Rust front end (opt-in)",
    "vllm/third_party/deep_gemm": "DeepGEMM: block FP8 when chosen; not the Triton / FlashInfer CUTLASS backends",
    "vllm/third_party/fmha_sm100": "SM100 (Blackwell) attention",
    "triton/backends/nvidia/bin/ptxas-blackwell": "ptxas for sm_100+ (Triton runs bin/ptxas below arch 100)",
    "triton/backends/nvidia/lib/cupti": "CUPTI for Triton's Proton profiler (triton.profiler) only",
    "triton/_C/libproton.so": "the Proton profiler (vLLM's optional proton profiler wrapper only)",
    "triton/instrumentation/libGPUInstrumentationTestLib.so": "a test library",
    "torch/bin/protoc": "protobuf compiler",
    "torch/bin/protoc-3.13.0.0": "protobuf compiler",
    "bin": "console scripts with this machine's interpreter in their #! line; on the host: python3 -m ...",
}

# Written into the site: Python imports it at start-up when the site is on PYTHONPATH (site.py's sitecustomize).
# A PYTHONPATH folder's .pth files are not run, so it runs them as site-packages would (the CuTe DSL's puts its
# `cutlass` package on sys.path), and it lets torch 2.13 (built against cuDNN 9.20) use the host's cuDNN 9.19, whose
# symbols suffice (symcheck.py): torch's minor-version check would raise at the first cuDNN call otherwise. Then it
# runs the sitecustomize it shadows, if any.
SITECUSTOMIZE = """\
# Written by benchmarks/device/offline_engine/bundle.py (the offline engine bundle for the H200 device host).
import os as _os
import site as _site
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
_site.addsitedir(_here)  # run this folder's .pth files (nvidia_cutlass_dsl_packages.pth) as site-packages would
_os.environ.setdefault("PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK", "1")  # host cuDNN 9.19, torch built on 9.20
for _dir in _sys.path:  # the sitecustomize this one shadows
    _other = _os.path.join(_dir or ".", "sitecustomize.py")
    if _os.path.abspath(_dir or ".") != _here and _os.path.isfile(_other):
        with open(_other) as _f:
            exec(compile(_f.read(), _other, "exec"), {"__name__": "sitecustomize", "__file__": _other})
        break
"""


@dataclass
class Selection:
    travels: dict[str, str]  # name -> version
    why: dict[str, str]  # name -> why it travels, stays or is skipped
    stays: dict[str, str]  # name -> host version
    skipped: dict[str, str]  # name -> version


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock_text(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[normalise(name)] = version.strip()
    return pins


def old_lock_text(rev: str = OLD_LOCK_REV) -> str:
    return subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:docker/cuda-constraints.txt"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def read_host(path: Path, old: dict[str, str]) -> dict[str, str | None]:
    """name -> version on the host (pip list's where known, else the old lock's, else None)."""
    host: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, version = line.partition("==")
        host[normalise(name)] = version or old.get(normalise(name))
    return host


def wheel_path(wheels: Path, name: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    hits = sorted(w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version.lower()}-"))
    if len(hits) != 1:
        raise SystemExit(f"bundle: want one wheel {stem}-{version}-*.whl in {wheels}, found {len(hits)}")
    return hits[0]


def requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    return re.findall(r"^Requires-Dist: (.*)$", text, re.M)


def host_env() -> dict[str, str]:
    env = default_environment()
    env.update(python_version="3.12", python_full_version="3.12.3", implementation_name="cpython",
               platform_python_implementation="CPython", sys_platform="linux", platform_system="Linux",
               platform_machine="x86_64", os_name="posix")  # fmt: skip
    return env


def select(lock: dict[str, str], host: dict[str, str | None], requires_of, nvidia: dict[str, dict]) -> Selection:
    """Which lock packages travel. requires_of(name) -> the Requires-Dist lines of the lock's wheel of name;
    nvidia: symcheck.py's verdict per nvidia-* package ({"travels": bool, "why": str}; empty: none travels)."""
    env = host_env()
    travels: dict[str, str] = {}
    why: dict[str, str] = {}
    for name in lock:
        if name in ENGINE:
            travels[name], why[name] = lock[name], "the engine (the image's pin)"
        elif name in NVIDIA_LIBS:
            verdict = nvidia.get(name, {"travels": False, "why": "not checked (no symbol verdict yet)"})
            why[name] = f"symcheck: {verdict['why']}"
            if verdict["travels"]:
                travels[name] = lock[name]
        elif name not in host:
            if name not in SKIPPED:
                travels[name], why[name] = lock[name], "the host lacks it"
        elif host[name] == lock[name]:
            why[name] = "same version on the host"
    changed = True
    while changed:  # a travelling package's requirement may exclude a host version: that package travels too
        changed = False
        for name in sorted(travels):
            for line in requires_of(name):
                req = Requirement(line)
                dep = normalise(req.name)
                if dep not in lock or dep in travels or dep in NVIDIA_LIBS or dep not in host:
                    continue
                if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                    continue
                have = host[dep]
                if have is None or not req.specifier.contains(Version(have), prereleases=True):
                    travels[dep] = lock[dep]
                    why[dep] = f"{name} requires {req.name}{req.specifier}; the host has {have}"
                    changed = True
    stays = {}
    for name in lock:
        if name in travels or name not in host:
            continue
        stays[name] = host[name] or "?"
        why.setdefault(name, f"the host's {host[name]} meets every travelling package's requirement")
    skipped = {name: lock[name] for name in lock if name not in travels and name not in host}
    for name in skipped:
        why[name] = SKIPPED.get(name, "symbols: the host's version serves")
    return Selection(travels=travels, why=why, stays=stays, skipped=skipped)


def prune(site: Path) -> int:
    """Remove PRUNED and Python bytecode caches from site; return the bytes freed."""
    freed = 0
    for rel in PRUNED:
        path = site / rel
        if path.is_dir() and not path.is_symlink():
            freed += sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            freed += path.lstat().st_size
            path.unlink()
    for cache in list(site.rglob("__pycache__")):
        if cache.is_dir():
            freed += sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
            shutil.rmtree(cache)
    return freed


# ---------------------------------------------------------------------------------------------- pieces and sums


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the git-tracked tree, what every upload carries besides its folder, each file in whole 4 KiB blocks.

    The upload's size check counts disk blocks, not bytes: on 2026-12-06 a 63.4 MiB upload (766 files, 8.9 MiB of
    bytes, 10.5 MiB in blocks) was refused as over 64 MiB.
    """
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True).stdout
    total = 0
    for rel in files.split(b"\0"):
        path = repo / os.fsdecode(rel)
        if rel and path.is_file() and not path.is_symlink():
            total += -(-path.stat().st_size // BLOCK) * BLOCK
    return total


def piece_bytes(tree: int, limit: int = TRANSFER_LIMIT, margin: int = MARGIN) -> int:
    """The largest piece one upload can carry beside the tree, the margin left free."""
    size = limit - tree - margin
    if size <= 0:
        raise ValueError(f"the tracked tree ({tree} bytes) leaves no room in an upload of {limit} bytes")
    return size


def split(bundle: Path, dest: Path, size: int) -> list[Path]:
    """Cut bundle into dest/pNN/<bundle>.partNN of at most size bytes each; write SHA256SUMS into every folder."""
    total = bundle.stat().st_size
    count = max(1, -(-total // size))
    if count > 100:
        raise ValueError(f"{count} pieces: more than pNN can name")
    pieces = []
    with bundle.open("rb") as src:
        for k in range(count):
            folder = dest / f"p{k:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            piece = folder / f"{bundle.name}.part{k:02d}"
            with piece.open("wb") as out:
                left = min(size, total - k * size)
                while left:
                    chunk = src.read(min(left, 16 * MIB))
                    out.write(chunk)
                    left -= len(chunk)
            pieces.append(piece)
    sums = "".join(f"{sha256(p)}  {p.name}\n" for p in pieces) + f"{sha256(bundle)}  {bundle.name}\n"
    for piece in pieces:
        (piece.parent / "SHA256SUMS").write_text(sums)
    return pieces


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(16 * MIB):
            h.update(chunk)
    return h.hexdigest()


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def check_transfers(folders: list[Path], tree: int, limit: int = TRANSFER_LIMIT) -> list[tuple[Path, int]]:
    """(folder, bytes it and the tree carry) of each folder over the upload limit."""
    return [(f, tree + folder_bytes(f)) for f in folders if tree + folder_bytes(f) > limit]


# ------------------------------------------------------------------------------------------------------- CLI


def cmd_select(args: argparse.Namespace) -> int:
    lock = read_lock_text(args.lock.read_text())
    old = read_lock_text(old_lock_text(args.old_lock_rev))
    host = read_host(args.host, old)
    verdict = json.loads(args.symcheck.read_text()) if args.symcheck else {"packages": {}}
    sel = select(lock, host, lambda n: requires(wheel_path(args.wheels, n, lock[n])), verdict["packages"])
    out = {
        "travels": {n: {"version": v, "why": sel.why[n], "wheel": wheel_path(args.wheels, n, v).name}
                    for n, v in sorted(sel.travels.items())},
        "stays": {n: {"host": v, "image": lock[n], "why": sel.why[n]} for n, v in sorted(sel.stays.items())},
        "skipped": {n: {"version": v, "why": sel.why[n]} for n, v in sorted(sel.skipped.items())},
    }  # fmt: skip
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"bundle: {len(sel.travels)} packages travel, {len(sel.stays)} stay on the host, "
          f"{len(sel.skipped)} skipped")  # fmt: skip
    for name, entry in out["travels"].items():
        if entry["why"] not in ("the host lacks it", "the engine (the image's pin)"):
            print(f"bundle:   travels {name}=={entry['version']}: {entry['why']}")
    for name, entry in out["stays"].items():
        if entry["host"] != entry["image"]:
            print(f"bundle:   stays   {name} {entry['host']} (image {entry['image']}): {entry['why']}")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    freed = prune(args.site)
    (args.site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    print(f"bundle: pruned {freed / MIB:.0f} MiB from {args.site}; wrote sitecustomize.py")
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    """A digest of what decides the bundle's content: a different one means build again."""
    parts = [LOCK.read_text(), HOST_PACKAGES.read_text(), OLD_LOCK_REV, repr(ENGINE), repr(NVIDIA_LIBS),
             repr(sorted(SKIPPED)), repr(sorted(PRUNED)), SITECUSTOMIZE, args.extra]  # fmt: skip
    print(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])
    return 0


def cmd_wheels(args: argparse.Namespace) -> int:
    """Print `name==version` of each wheel the build needs that args.wheels lacks (the lock's, less SKIPPED)."""
    lock = read_lock_text(args.lock.read_text())
    if args.old_nvidia:
        old = read_lock_text(old_lock_text(args.old_lock_rev))
        want = {n: old[n] for n in NVIDIA_LIBS if n in old and n in lock and old[n] != lock[n]}
    else:
        want = {n: v for n, v in lock.items() if n not in SKIPPED}
    for name, version in sorted(want.items()):
        stem = re.sub(r"[-_.]+", "_", name).lower()
        if not any(w.name.lower().startswith(f"{stem}-{version.lower()}-") for w in args.wheels.glob("*.whl")):
            print(f"{name}=={version}")
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    tree = tree_bytes()
    size = piece_bytes(tree, margin=args.margin)
    for old in sorted(args.dest.glob("p[0-9][0-9]")):
        shutil.rmtree(old)
    pieces = split(args.bundle, args.dest, size)
    folders = [p.parent for p in pieces]
    over = check_transfers(folders, tree)
    for piece in pieces:
        print(f"bundle: {piece.parent.name}/{piece.name} {piece.stat().st_size / MIB:6.2f} MiB"
              f" (+ tree {tree / MIB:.2f} MiB = {(tree + folder_bytes(piece.parent)) / MIB:.2f} MiB)")  # fmt: skip
    if over:
        for folder, total in over:
            print(f"bundle: {folder} with the tree is {total} bytes, over {TRANSFER_LIMIT}", file=sys.stderr)
        return 1
    print(f"bundle: {len(pieces)} pieces of at most {size} bytes: {len(pieces)} uploads")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select", help="which lock packages travel")
    s.add_argument("--lock", type=Path, default=LOCK)
    s.add_argument("--old-lock-rev", default=OLD_LOCK_REV)
    s.add_argument("--host", type=Path, default=HOST_PACKAGES)
    s.add_argument("--wheels", type=Path, required=True)
    s.add_argument("--symcheck", type=Path, help="symcheck.py's verdict: which nvidia-* wheels travel")
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=cmd_select)
    k = sub.add_parser("key", help="a digest of what decides the bundle's content")
    k.add_argument("--extra", default="", help="more that decides it (the xz level)")
    k.set_defaults(func=cmd_key)
    w = sub.add_parser("wheels", help="the lock's wheels missing from a folder, as name==version")
    w.add_argument("--lock", type=Path, default=LOCK)
    w.add_argument("--old-lock-rev", default=OLD_LOCK_REV)
    w.add_argument("--old-nvidia", action="store_true", help="the old lock's differing nvidia-* wheels instead")
    w.add_argument("--wheels", type=Path, required=True)
    w.set_defaults(func=cmd_wheels)
    p = sub.add_parser("prune", help="remove what serving on an H200 never loads; write sitecustomize.py")
    p.add_argument("site", type=Path)
    p.set_defaults(func=cmd_prune)
    st = sub.add_parser("stage", help="split the bundle into one folder per upload")
    st.add_argument("--bundle", type=Path, required=True)
    st.add_argument("--dest", type=Path, default=REPO / ".offline")
    st.add_argument("--margin", type=int, default=MARGIN)
    st.set_defaults(func=cmd_stage)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
