"""Any user, read-only model, and an engine that dies: the container as a `docker run --user` user runs it.

One container, started as uid:gid 4321:4321 (no such user in the image) with the model read-only: it serves,
writes nothing outside /tmp, and when its engine process is killed the container exits non-zero with no
/ping 200 in between (no supervisor hides the death; SageMaker replaces the instance).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import httpx
import pytest

from tests.image.conftest import readable_copy, running
from tests.image.container import MODEL_MOUNT, Container

USER = "4321:4321"


@pytest.fixture(scope="module")
def non_root(tiny_model: Path, model_root: Path) -> Iterator[Container]:
    model = readable_copy(tiny_model, model_root / "non-root", serving_properties=None)
    container = Container(name="moe-image-test-non-root", model=model, user=USER)
    with running(container):
        container.wait_ready()
        yield container


def test_it_serves_as_an_arbitrary_uid(non_root: Container) -> None:
    assert non_root.state("{{.Config.User}}") == USER
    # details: the CPU engine compiles its logprobs kernel now (torch inductor), writing as this uid.
    body = {"inputs": "hi", "parameters": {"max_new_tokens": 4, "details": True}}
    lmi = httpx.post(non_root.url + "/invocations", json=body, timeout=120)
    assert lmi.status_code == 200 and len(lmi.json()["details"]["tokens"]) == 4, lmi.text
    stream = httpx.post(
        non_root.url + "/invocations",
        json={"inputs": "hi", "parameters": {"max_new_tokens": 4}, "stream": True},
        timeout=60,
    )
    assert stream.status_code == 200 and len(stream.text.splitlines()) == 4


def test_the_baked_model_info_is_readable_by_any_uid(non_root: Container) -> None:
    # vLLM writes its entries 0600 as root at build; unreadable, they would be lost to this user without an error
    found = re.search(r"model info: (\d+) baked entries copied into /tmp/\.cache/vllm/modelinfos", non_root.logs())
    assert found and int(found.group(1)) > 100, non_root.logs()[-3000:]


def test_every_write_goes_under_tmp(non_root: Container) -> None:
    changed = non_root.changed_paths()
    # Docker itself adds the mount point (/opt/ml/model and its parents) to the container's layer.
    mount_point = {MODEL_MOUNT, *map(str, PurePosixPath(MODEL_MOUNT).parents)}
    outside = [path for path in changed if path not in mount_point and path != "/tmp" and not path.startswith("/tmp/")]
    assert not outside, f"written outside /tmp: {outside}"


def test_the_model_mount_is_read_only(non_root: Container) -> None:
    mounts = non_root.state('{{range .Mounts}}{{if eq .Destination "/opt/ml/model"}}{{.RW}}{{end}}{{end}}')
    assert mounts == "false"


def test_a_killed_engine_stops_the_container_non_zero_and_ping_never_says_200(non_root: Container) -> None:
    engines = non_root.engine_pids()
    assert engines, "expected vLLM's EngineCore process in the container"
    os.kill(engines[0], signal.SIGKILL)
    killed = time.monotonic()
    oks: list[float] = []
    while non_root.running() and time.monotonic() - killed < 30:
        try:
            if httpx.get(non_root.url + "/ping", timeout=2).status_code == 200:
                oks.append(time.monotonic() - killed)
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    code = non_root.wait_exit(timeout=30)
    print(f"engine killed: container exited with {code} after {time.monotonic() - killed:.1f} s")
    assert code != 0, "the container must exit non-zero when its engine dies"
    assert not oks, f"/ping answered 200 {oks[0]:.2f} s after the engine was killed"
