"""End-to-end fixtures: the real `python -m entrypoint serve` on the tiny MoE, CPU vLLM engine.

Every test under tests/e2e is marked `e2e`. The shared server starts once per session; tests
that kill or stop a server start their own. A failing test's report carries the server log tail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from entrypoint.model.tiny_model import ensure_tiny_model
from entrypoint.run_local import tiny_model_dir
from tools.local_server import STARTED, Server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    e2e = [i for i, item in enumerate(items) if here in Path(str(item.fspath)).parents]
    for i in e2e:
        items[i].add_marker(pytest.mark.e2e)
    # The lifecycle tests start (and kill) servers of their own: run them before the shared session server
    # exists, so that two vLLM engines never compete for a 2-core CI machine under their timing checks.
    if e2e:
        first = e2e[0]
        block = [items[i] for i in e2e]
        own = [item for item in block if Path(str(item.fspath)).name == "test_lifecycle.py"]
        rest = [item for item in block if item not in own]
        for offset, item in enumerate(own + rest):
            items[first + offset] = item


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and STARTED:
        for server in STARTED:
            report.sections.append((f"server log ({server.log_path})", server.log_tail()))


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return ensure_tiny_model(tiny_model_dir(dict(os.environ)))


@pytest.fixture(scope="session")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    srv = Server(["serve", "--model", str(tiny_model), "--host", "127.0.0.1"], log).start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c
