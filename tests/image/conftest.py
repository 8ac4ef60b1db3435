"""Container tests: the built image, run the way SageMaker runs it (`make image-test FLAVOUR=cpu`).

Every test here is marked `image` and needs a Docker engine and the image (docker/image_test.sh builds it and
starts the engine when none runs); `make test` deselects them. The model is the tiny MoE, generated on the host
and mounted read-only at /opt/ml/model. A failing test's report carries the logs of every container it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.model.tiny_model import ensure_tiny_model
from entrypoint.run_local import tiny_model_dir
from tests.image.container import Container

HERE = Path(__file__).parent
STARTED: list[Container] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.image)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for container in STARTED:
            report.sections.append((f"docker logs {container.name}", container.logs()[-6000:]))


@contextlib.contextmanager
def running(container: Container) -> Iterator[Container]:
    """Start `container`; remove it afterwards, also when the test failed. Its logs go into failure reports."""
    STARTED.append(container)
    try:
        yield container.start()
    finally:
        container.remove()
        STARTED.remove(container)


def readable_copy(source: Path, dest: Path, serving_properties: str | None) -> Path:
    """A copy of the tiny model that any uid can read, with our serving.properties (None: without one)."""
    shutil.copytree(source, dest)
    if serving_properties is None:
        (dest / "serving.properties").unlink(missing_ok=True)
    else:
        (dest / "serving.properties").write_text(serving_properties)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return ensure_tiny_model(tiny_model_dir(dict(os.environ)))


@pytest.fixture(scope="session")
def model_root() -> Iterator[Path]:
    """World-readable, unlike pytest's tmp dirs (0700): the non-root container must read the mounted model."""
    root = Path(tempfile.mkdtemp(prefix="moe-image-models-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)
