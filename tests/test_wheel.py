"""The wheel of this project holds exactly what the image ships: entrypoint (and its subpackages),
sagemaker_deploy, kernels with its tuned configs and dispatch table, and ops (our kernels, run by the engine plugin);
never tools, benchmarks, tests, or kernel_checks (our kernels' float64 references and problem generators, which
tests and benchmarks use and the image does not).

The image installs the project with `pip install --no-deps --no-build-isolation .` (docker/install_project.sh);
this builds the same wheel the same way, from a copy of the checkout (so a stale build/lib cannot leak files into
it and nothing is written into the working tree), and reads its file list.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest_paths import REPO
from tests.docker.build_context import checkout_files

SHIPPED = ("entrypoint", "sagemaker_deploy", "kernels", "ops")
NEVER = ("tools", "benchmarks", "tests", "kernel_checks")
DIST_INFO = re.compile(r"^moe_serving-[^/]+\.dist-info/")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.Path:
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for rel in checkout_files():
        if rel.endswith(".whl"):  # wheels staged for the image build (docker/wheels/) are not sources
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (built,) = out.glob("moe_serving-*.whl")
    return zipfile.Path(built)


@pytest.fixture(scope="module")
def wheel_files(wheel: zipfile.Path) -> set[str]:
    with zipfile.ZipFile(wheel.root.filename) as archive:
        return set(archive.namelist())


def _checkout(pattern: str) -> set[str]:
    return {p for p in checkout_files() if re.fullmatch(pattern, p)}


def test_the_wheel_holds_the_shipped_packages_and_nothing_else(wheel_files: set[str]) -> None:
    tops = {name.split("/")[0] for name in wheel_files if not DIST_INFO.match(name)}
    assert tops == set(SHIPPED)


def test_no_module_of_tools_benchmarks_or_tests_is_in_the_wheel(wheel_files: set[str]) -> None:
    leaked = sorted(name for name in wheel_files if name.split("/")[0] in NEVER)
    assert leaked == []


def test_the_kernel_references_and_problem_generators_are_not_in_the_wheel(wheel_files: set[str]) -> None:
    # They shipped inside ops until issue 30: float64 references and random inputs run in tests, never in the engine.
    assert {"kernel_checks/reference.py", "kernel_checks/problems.py"} <= set(checkout_files())
    leaked = sorted(
        name
        for name in wheel_files
        if name.startswith("kernel_checks/") or name in ("ops/reference.py", "ops/problems.py")
    )
    assert leaked == []


def test_every_module_of_the_shipped_packages_is_in_the_wheel(wheel_files: set[str]) -> None:
    # subpackages included: entrypoint's are picked up by pyproject's packages.find, not listed one by one
    modules = _checkout(r"(entrypoint|sagemaker_deploy|kernels|ops)/(.+/)?[^/]+\.py")
    assert {
        "entrypoint/__main__.py",
        "kernels/aot.py",
        "entrypoint/moe_plugin/hook.py",
        "ops/fused_moe_fp8.py",
    } <= modules
    assert modules - wheel_files == set()


def test_the_tuned_configs_and_the_capability_tables_ship_as_package_data(wheel_files: set[str]) -> None:
    data = _checkout(r"kernels/configs/[^/]+\.json") | _checkout(r"entrypoint/data/[^/]+\.json")
    data |= {"kernels/fused_moe_dispatch.json"}
    assert any(p.startswith("kernels/configs/E=") for p in data)
    assert data - wheel_files == set()


def test_the_engine_plugin_is_registered_for_vllm(wheel: zipfile.Path, wheel_files: set[str]) -> None:
    # vLLM finds general plugins through this entry point group (vllm/plugins/__init__.py load_plugins_by_group)
    (name,) = [n for n in wheel_files if n.endswith(".dist-info/entry_points.txt")]
    text = (wheel / name).read_text()
    section = text.split("[vllm.general_plugins]", 1)[1].split("\n[", 1)[0]
    assert section.split() == ["moe_serving_fused_moe", "=", "entrypoint.moe_plugin:register"]
