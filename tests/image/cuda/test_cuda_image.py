"""The cuda image on a machine without a GPU (`make image-test FLAVOUR=cuda`, run by CI): what can be proven
before an H200 sees it.

Each test starts its own short-lived container of MOE_IMAGE (docker/image_test.sh builds it) on the host network,
without `--gpus`: versions against the pins, every shared library the engine loads, the plan printed for an FP8
static MoE checkpoint, the engine plugin against the image's vLLM, the baked Triton and FlashInfer caches, writes
as an arbitrary uid, and the refusal of `serve` without GPUs. What only a GPU proves (the engine serving) is
`make test-gpu` on an H200 host.
"""

from __future__ import annotations

import json
import time
from pathlib import PurePosixPath

import pytest

from tests.conftest_paths import REPO
from tests.image.container import IMAGE, MODEL_MOUNT, docker
from tools import cuda_lock

USER = "4321:4321"  # no such user in the image, as `docker run --user` and some platforms start it
FP8_STATIC_MOE = REPO / "tests" / "fixtures" / "models" / "qwen3-30b-a3b-fp8-static-synthetic"
# The only library an engine extension may lack here: the NVIDIA driver's, which the container toolkit mounts.
DRIVER_LIBRARIES = {"libcuda.so.1"}


@pytest.fixture(scope="module", autouse=True)
def cuda_image() -> None:
    flavour = docker("inspect", "-f", '{{index .Config.Labels "com.moe-serving.flavour"}}', IMAGE).stdout.strip()
    assert flavour == "cuda", f"MOE_IMAGE={IMAGE} is the {flavour!r} flavour; these tests are for the cuda image"


def python_in_image(code: str, *args: str, user: str | None = None, timeout: float = 300) -> str:
    """Run `python3 -c code` in a fresh container of the image (no GPU); its stdout. Fails on a non-zero exit."""
    as_user = ["--user", user] if user else []
    done = docker(
        "run", "--rm", "--network", "host", *as_user, "--entrypoint", "python3", IMAGE, "-c", code, *args,
        timeout=timeout,
    )  # fmt: skip
    return done.stdout


def test_versions_inside_equal_the_pins_and_the_engine_imports() -> None:
    code = (
        "import json, importlib.metadata as m, torch, vllm, flashinfer, triton, transformers; "
        "names = ['vllm', 'torch', 'flashinfer-python', 'triton', 'transformers', 'nvidia-cuda-nvcc']; "
        "print(json.dumps({n: m.version(n) for n in names} | {'torch.version.cuda': torch.version.cuda}))"
    )
    inside = json.loads(python_in_image(code).strip().splitlines()[-1])
    pins, lock = cuda_lock.dockerfile_args(), cuda_lock.read_lock()
    assert inside["vllm"] == pins["VLLM_VERSION"]
    assert inside["torch"].split("+")[0] == pins["TORCH_VERSION"] and inside["torch.version.cuda"] == "13.0"
    assert inside["flashinfer-python"] == pins["FLASHINFER_VERSION"]
    assert inside["transformers"] == pins["TRANSFORMERS_VERSION"]
    assert inside["triton"] == lock["triton"] and inside["nvidia-cuda-nvcc"] == lock["nvidia-cuda-nvcc"]
    print(f"cuda image versions: {inside}")


# The extensions of vLLM, torch and FlashInfer (and the FlashInfer modules baked into the workspace) under `ldd`, with
# the library folders a running engine already has loaded from: vLLM's and FlashInfer's extensions carry no rpath and
# find libtorch, libcudart and the rest because `import torch` loaded them first (from torch/lib and the nvidia/*
# wheels' lib folders, through torch's own rpaths).
LDD_SWEEP = r"""
import glob, json, os, subprocess, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
roots = [os.path.join(site, p) for p in ("vllm", "torch", "flashinfer")] + sys.argv[1:]
libs = sorted(os.path.join(d, f) for r in roots for d, _, fs in os.walk(r) for f in fs
              if f.endswith(".so") or ".so." in f)
loaded = [os.path.join(site, "torch", "lib"), *glob.glob(os.path.join(site, "nvidia", "*", "lib"))]
env = {**os.environ, "LD_LIBRARY_PATH": ":".join(loaded)}
missing = {}
for lib in libs:
    out = subprocess.run(["ldd", lib], capture_output=True, text=True, env=env).stdout
    lost = sorted({line.split()[0] for line in out.splitlines() if "not found" in line})
    if lost:
        missing[lib] = lost
print(json.dumps({"checked": len(libs), "missing": missing}))
"""


def test_every_shared_library_the_engine_loads_resolves_except_the_drivers() -> None:
    report = json.loads(python_in_image(LDD_SWEEP, "/opt/moe-serving/flashinfer").strip().splitlines()[-1])
    unresolved = {lib: [d for d in deps if d not in DRIVER_LIBRARIES] for lib, deps in report["missing"].items()}
    unresolved = {lib: deps for lib, deps in unresolved.items() if deps}
    assert report["checked"] > 20, report
    assert not unresolved, json.dumps(unresolved, indent=1)[:4000]
    needs_driver = sum(1 for deps in report["missing"].values() if "libcuda.so.1" in deps)
    print(f"ldd: {report['checked']} libraries; {needs_driver} need only the driver's libcuda.so.1")


def test_resolve_on_an_fp8_static_moe_config_plans_triton_tuned_tiles_and_our_kernel() -> None:
    done = docker(
        "run", "--rm", "--network", "host", "-v", f"{FP8_STATIC_MOE}:{MODEL_MOUNT}:ro", IMAGE,
        "resolve", "--gpu", "H200", "--json",
    )  # fmt: skip
    plan = json.loads(done.stdout)
    text = json.dumps(plan)
    assert plan["moe_backend"] == plan["effective_moe_backend"] == "triton", text[:3000]
    assert "baked file matches" in text and "/opt/moe-serving/kernel-configs" in text, text[:3000]
    assert plan["moe_kernel"] == "project", text[:3000]
    assert plan["vllm_version"].startswith(cuda_lock.dockerfile_args()["VLLM_VERSION"]), text[:3000]


def test_the_plugin_entry_point_is_visible_and_finds_its_hook_in_the_images_vllm() -> None:
    code = (
        "from importlib.metadata import entry_points; "
        "eps = [e for e in entry_points(group='vllm.general_plugins') if e.name == 'moe_serving_fused_moe']; "
        "assert eps, 'entry point missing'; eps[0].load(); "
        "from entrypoint.moe_plugin import hook; cls, why = hook.find_hook(); "
        "print('hook', hook.vllm_version(), cls.__module__ + '.' + cls.__name__ if cls else 'MISSING: ' + why)"
    )
    out = python_in_image(code).strip().splitlines()[-1]
    assert out.startswith("hook ") and "MISSING" not in out, out
    assert out.split()[1].startswith(cuda_lock.dockerfile_args()["VLLM_VERSION"]), out


TRITON_CACHE_SWEEP = r"""
import json, os
root = "/opt/moe-serving/triton-cache"
kernels, archs, writable, unreadable = {}, set(), [], []
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        if not os.access(p, os.R_OK):
            unreadable.append(p)
        if os.access(p, os.W_OK) or os.access(d, os.W_OK):
            writable.append(p)
        if f.endswith(".json") and not f.startswith("__grp__"):
            meta = json.load(open(p))
            kernels[meta["name"]] = kernels.get(meta["name"], 0) + 1
            archs.add(str(meta["target"]["arch"]))
print(json.dumps({"kernels": kernels, "archs": sorted(archs), "writable": writable[:5], "unreadable": unreadable[:5]}))
"""


def test_the_baked_triton_cache_holds_the_moe_kernels_for_sm90_read_only_for_any_uid() -> None:
    report = json.loads(python_in_image(TRITON_CACHE_SWEEP, user=USER).strip().splitlines()[-1])
    assert report["archs"] == ["90"], report
    assert not report["unreadable"] and not report["writable"], report
    # vLLM's kernel at every tuned (shape, M) tile, and ours at every M of the dispatch table (docker/aot_cache.sh)
    tuned = len(list((REPO / "kernels" / "configs").glob("E=*.json")))
    assert report["kernels"].get("fused_moe_kernel", 0) >= tuned, report
    assert report["kernels"].get("moe_gemm1_kernel", 0) > 0, report
    print(f"baked triton cache (sm_90, read by uid {USER}): {report['kernels']}")


def test_flashinfers_prebuilt_modules_need_no_rebuild_for_any_uid() -> None:
    done = docker(
        "run", "--rm", "--network", "host", "--user", USER, "--entrypoint", "python3", IMAGE,
        "/opt/moe-serving/docker/flashinfer_jit_cache.py", "--workspace", "/opt/moe-serving/flashinfer", "--check",
        timeout=300,
    )  # fmt: skip
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert reports and all(r["ok"] for r in reports), done.stdout + done.stderr
    print("flashinfer modules up to date: " + ", ".join(f"{r['module']} ({r['arch']})" for r in reports))


def run_kept(name: str, *args: str) -> tuple[int, str, float, list[str]]:
    """`docker run` as USER with the FP8 config read-only at /opt/ml/model, kept until its exit: code, logs, seconds,
    and the paths it wrote outside /tmp (`docker diff`; Docker itself adds the mount point)."""
    docker("rm", "-f", name, check=False)
    began = time.monotonic()
    try:
        docker(
            "run", "--name", name, "--network", "host", "--user", USER, "-v", f"{FP8_STATIC_MOE}:{MODEL_MOUNT}:ro",
            *args, timeout=300, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - began
        code = int(docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip())
        logs = docker("logs", name)
        changed = [line.split(" ", 1)[1] for line in docker("diff", name).stdout.splitlines() if line.strip()]
    finally:
        docker("rm", "-f", name, check=False)
    mount_point = {MODEL_MOUNT, *map(str, PurePosixPath(MODEL_MOUNT).parents)}
    outside = [p for p in changed if p not in mount_point and p != "/tmp" and not p.startswith("/tmp/")]
    return code, logs.stdout + logs.stderr, seconds, outside


def test_serve_without_gpus_refuses_in_seconds_in_one_line_loading_nothing() -> None:
    code, logs, seconds, outside = run_kept("moe-image-test-cuda-no-gpu", IMAGE, "serve")
    print(f"serve without --gpus: exit {code} after {seconds:.1f} s: {logs.strip()!r}")
    assert code == 2, logs
    assert seconds < 30, f"took {seconds:.1f} s to refuse"
    lines = [line for line in logs.splitlines() if line.strip()]
    assert len(lines) == 1 and "--gpus all" in lines[0], logs
    assert "Traceback" not in logs and not outside, (logs, outside)


def test_bake_cache_without_gpus_refuses_to_tune_before_anything_loads() -> None:
    # `make cache-layer` on a host without GPUs: the layer would hold neither tuned kernels nor GPU caches (issue 32)
    started = time.monotonic()
    done = docker(
        "run", "--rm", "--network", "host", "--user", USER, "-v", f"{FP8_STATIC_MOE}:{MODEL_MOUNT}:ro", IMAGE,
        "bake-cache", "--out", "/tmp/layer", check=False, timeout=120,
    )  # fmt: skip
    seconds = time.monotonic() - started
    print(f"bake-cache without --gpus: exit {done.returncode} after {seconds:.1f} s: {done.stderr.strip()[-300:]!r}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "bake-cache --tune='auto': no NVIDIA GPU is visible, and the cuda image tunes kernels" in done.stderr
    assert "--gpus all" in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert seconds < 60, f"took {seconds:.1f} s to refuse"


def test_an_arbitrary_uid_writes_nothing_outside_tmp() -> None:
    # what runs without a GPU: the engine's imports (vLLM, FlashInfer, torch, Triton) and the plan for the mount
    code = (
        "import vllm, flashinfer, torch, triton; from entrypoint.inputs.gather import build_plan; "
        "plan = build_plan(gpu='H200'); print('planned', plan.effective_moe_backend)"
    )
    status, logs, _, outside = run_kept("moe-image-test-cuda-uid", "--entrypoint", "python3", IMAGE, "-c", code)
    assert status == 0 and "planned triton" in logs, logs[-3000:]
    assert not outside, f"written outside /tmp: {outside}"


def test_the_fixture_is_an_fp8_static_moe_checkpoint() -> None:
    # the plan test above is only meaningful on a per-tensor static FP8 MoE config
    quant = json.loads((FP8_STATIC_MOE / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "fp8" and quant["activation_scheme"] == "static"
    assert "weight_block_size" not in quant
