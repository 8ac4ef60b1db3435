"""Two engine workers in the container: `option.tensor_parallel_degree=2` on the CPU engine, run as SageMaker runs it.

`docker run IMAGE serve`, the tiny MoE read-only at /opt/ml/model, an arbitrary uid, the host network, and
`--shm-size 1g` (docs/deployment.md, "CPU engine workers"). vLLM's CPU engine then runs one worker process per rank
under its EngineCore, each bound to its own CPUs by the plan's VLLM_CPU_OMP_THREADS_BIND, talking through /dev/shm.
One container answers every request schema and then takes `docker stop` with 8 streams open; one container per rank
loses that worker to SIGKILL; three more are refused before anything loads (Docker's 64 MiB /dev/shm, one CPU, a
data-parallel worker of a MoE model).
The times go to the test output (-s): start to /ping 200, docker stop, exit after a killed worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.image.conftest import readable_copy, running
from tests.image.container import DOCKER, Container
from tools.local_server import is_final_or_error, open_lmi_streams

TP2 = {"OPTION_TENSOR_PARALLEL_DEGREE": "2"}
USER = "4321:4321"  # no such user in the image
SHM = ("--shm-size", "1g")
STOP_GRACE_S = 30.0  # SageMaker's
DEAD_EXIT_S = 30.0  # a killed worker must end the container within this


def tp2(name: str, model: Path, *docker_args: str) -> Container:
    return Container(name=name, env=TP2, model=model, user=USER, docker_args=docker_args or SHM)


@pytest.fixture(scope="module")
def model(tiny_model: Path, model_root: Path) -> Path:
    return readable_copy(tiny_model, model_root / "two-workers", serving_properties=None)


@pytest.fixture(scope="module")
def served(model: Path) -> Iterator[Container]:
    container = tp2("moe-image-test-tp2", model)
    with running(container):
        print(f"tp2: container start to first /ping 200: {container.wait_ready():.1f} s")
        yield container


def test_each_worker_runs_on_cpus_of_its_own(served: Container) -> None:
    assert sorted(served.worker_pids()) == ["VLLM::Worker_TP0", "VLLM::Worker_TP1"]
    logs = served.logs()
    planned = re.search(r"cpu binding: VLLM_CPU_OMP_THREADS_BIND=(\S+) \(2 rank\(s\)", logs)
    assert planned, logs[-3000:]
    # vLLM's own account of the binding (vllm/utils/ompmultiprocessing.py): one line per local rank
    bound = dict(re.findall(r"local_rank=(\d), core ids=\[([0-9, ]+)\]", logs))
    ranks = [set(map(int, bound[rank].split(","))) for rank in ("0", "1")]
    assert ranks[0] and ranks[1] and not ranks[0] & ranks[1], bound
    assert "shared memory: /dev/shm has" in logs


def post(container: Container, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(container.url + "/invocations", json=body, timeout=120)


def test_every_request_schema_is_answered(served: Container) -> None:
    lmi = post(served, {"inputs": "hi", "parameters": {"max_new_tokens": 6, "details": True, "ignore_eos_token": True}})
    assert lmi.status_code == 200 and lmi.json()["details"]["generated_tokens"] == 6, lmi.text
    chat = post(served, {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 6})
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion", chat.text
    completion = post(served, {"prompt": "Hello", "max_tokens": 6})
    assert completion.status_code == 200 and completion.json()["object"] == "text_completion", completion.text
    openai = httpx.post(served.url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 4}, timeout=60)
    assert openai.status_code == 200 and openai.json()["usage"]["completion_tokens"] == 4, openai.text
    body = {"inputs": "Tell me a story", "parameters": {"max_new_tokens": 10, "ignore_eos_token": True}, "stream": True}
    with httpx.stream("POST", served.url + "/invocations", json=body, timeout=60) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert response.status_code == 200 and len(lines) == 10
    assert lines[-1]["generated_text"] == "".join(line["token"]["text"] for line in lines)
    chat_stream = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True}
    with httpx.stream("POST", served.url + "/invocations", json=chat_stream, timeout=60) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert response.status_code == 200 and events[-1] == "data: [DONE]"
    assert all(json.loads(e[len("data: ") :])["object"] == "chat.completion.chunk" for e in events[:-1])


def test_docker_stop_with_8_open_streams_answers_every_client_and_exits_in_time(served: Container) -> None:
    async def scenario() -> tuple[list[tuple[list[dict[str, Any]], str | None]], float]:
        started = asyncio.Event()
        streams = asyncio.ensure_future(
            open_lmi_streams(served.url, 8, started, max_new_tokens=400, timeout_s=STOP_GRACE_S + 10)
        )
        await asyncio.wait_for(started.wait(), timeout=60)
        signalled = time.monotonic()
        stop = await asyncio.create_subprocess_exec(
            DOCKER, "stop", "-t", str(int(STOP_GRACE_S)), served.name, stdout=asyncio.subprocess.DEVNULL
        )
        results = await streams
        await stop.wait()
        return results, time.monotonic() - signalled

    results, stop_s = asyncio.run(scenario())
    print(f"tp2: docker stop with 8 open streams: {stop_s:.1f} s, exit code {served.exit_code()}")
    assert not served.running() and stop_s < STOP_GRACE_S, f"docker stop took {stop_s:.1f} s"
    assert served.exit_code() == 0, "a SIGTERM stop is a clean exit (137 would mean docker had to SIGKILL it)"
    for lines, transport_error in results:
        assert transport_error is None, f"stream cut without a final line: {transport_error}"
        assert lines and is_final_or_error(lines[-1]), lines[-1:]


@pytest.mark.parametrize("worker", ["VLLM::Worker_TP0", "VLLM::Worker_TP1"])
def test_a_killed_worker_stops_the_container_non_zero_and_ping_never_says_200(model: Path, worker: str) -> None:
    container = tp2(f"moe-image-test-tp2-kill-{worker[-1]}", model)
    with running(container):
        container.wait_ready()
        os.kill(container.worker_pids()[worker], signal.SIGKILL)
        killed = time.monotonic()
        oks: list[float] = []
        while container.running() and time.monotonic() - killed < DEAD_EXIT_S:
            try:
                if httpx.get(container.url + "/ping", timeout=2).status_code == 200:
                    oks.append(time.monotonic() - killed)
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        code = container.wait_exit(timeout=DEAD_EXIT_S)
        gone_s = time.monotonic() - killed
        print(f"tp2: {worker} killed: container exited with {code} after {gone_s:.1f} s")
        assert code != 0, "the container must exit non-zero when a worker dies"
        assert gone_s < DEAD_EXIT_S
        assert not oks, f"/ping answered 200 {oks[0]:.2f} s after {worker} was killed"


# A LeaderWorkerSet's second pod: a headless worker of data parallel, which vLLM 0.32's CPU engine cannot run for a
# MoE model (its CPU communicator lacks all_gatherv; seen: /ping 200, then every request failed).
LWS_WORKER = {"LWS_LEADER_ADDRESS": "127.0.0.1", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}


@pytest.mark.parametrize(
    ("docker_args", "env", "expected"),
    [
        ((), TP2, "start the container with `docker run --shm-size 1g`"),  # Docker's default /dev/shm: 64 MiB
        (("--cpuset-cpus", "0", *SHM), TP2, "Accepted: at most 1 ranks"),  # two ranks, one CPU
        (SHM, LWS_WORKER, "LWS_GROUP_SIZE='2': vLLM 0.32's CPU engine cannot run a MoE model data-parallel"),
    ],
    ids=["dockers-64MiB-shm", "one-cpu", "lws-worker-of-a-moe"],
)
def test_what_the_cpu_engine_cannot_run_exits_2_before_loading(
    model: Path, docker_args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    container = Container(name="moe-image-test-tp2-refused", env=env, model=model, user=USER, docker_args=docker_args)
    with running(container):
        code = container.wait_exit(timeout=120)
        logs = container.logs()
        assert code == 2, logs[-3000:]
        assert expected in logs and "Traceback" not in logs, logs[-3000:]
        print(f"refused ({' '.join(docker_args) or 'no --shm-size'}): {logs.strip().splitlines()[-1][:160]}")
