"""One container of the image, started the way SageMaker starts it, and the docker CLI calls the tests need.

`docker run -d --network host ... IMAGE serve`: the host network because these machines have no bridge network
(docs/reference/docker-on-dev-machines.md), so the server is told its port with SAGEMAKER_BIND_TO_PORT, as
SageMaker does, and is reached at 127.0.0.1:PORT.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tools.local_server import engine_core_children, free_port

DOCKER = os.environ.get("DOCKER", "docker")
IMAGE = os.environ.get("MOE_IMAGE", "moe-serving:cpu")
# Extra `docker run` arguments for the flavour (docker/image_test.sh: "--gpus all" for cuda).
RUN_ARGS = shlex.split(os.environ.get("MOE_IMAGE_RUN_ARGS", ""))
# A 2-core machine: the CPU engine starts in 15-35 s outside a container; leave room for a loaded CI machine.
START_DEADLINE_S = float(os.environ.get("IMAGE_START_DEADLINE_S", "240"))
MODEL_MOUNT = "/opt/ml/model"


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@dataclass
class Ping:
    """One /ping attempt: seconds since `docker run`, and the status or the transport error."""

    at_s: float
    status: int | None
    error: str | None = None


@dataclass
class Container:
    """A container of IMAGE; `env`, `model` (mounted read-only at /opt/ml/model) and `user` as SageMaker or a user
    would give them. `start()` runs it detached; `wait_ready()` polls /ping and keeps every answer."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    model: Path | None = None
    user: str | None = None
    command: tuple[str, ...] = ("serve",)
    docker_args: tuple[str, ...] = ()  # more `docker run` arguments (--shm-size, --cpuset-cpus)
    image: str = IMAGE
    port: int = field(default_factory=free_port)
    cid: str | None = None
    started_at: float = 0.0
    pings: list[Ping] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run_args(self) -> list[str]:
        args = ["run", "-d", "--network", "host", "--name", self.name, *RUN_ARGS, *self.docker_args]
        for key, value in {"SAGEMAKER_BIND_TO_PORT": str(self.port), **self.env}.items():
            args += ["-e", f"{key}={value}"]
        if self.model is not None:
            args += ["-v", f"{self.model}:{MODEL_MOUNT}:ro"]
        if self.user is not None:
            args += ["--user", self.user]
        return [*args, self.image, *self.command]

    def start(self) -> Container:
        docker("rm", "-f", self.name, check=False)
        self.started_at = time.monotonic()
        self.cid = docker(*self.run_args()).stdout.strip()
        return self

    def since_start(self) -> float:
        return time.monotonic() - self.started_at

    def wait_ready(self) -> float:
        """Poll /ping every 0.2 s until it answers 200; returns the seconds from `docker run` to that answer."""
        while self.since_start() < START_DEADLINE_S:
            if not self.running():
                raise AssertionError(f"the container exited ({self.exit_code()}) before /ping 200:\n{self.logs()}")
            try:
                status = httpx.get(self.url + "/ping", timeout=2).status_code
                self.pings.append(Ping(self.since_start(), status))
                if status == 200:
                    return self.pings[-1].at_s
            except httpx.TransportError as exc:
                self.pings.append(Ping(self.since_start(), None, type(exc).__name__))
            time.sleep(0.2)
        raise AssertionError(f"no /ping 200 within {START_DEADLINE_S:.0f} s:\n{self.logs()}")

    def state(self, template: str) -> str:
        return docker("inspect", "-f", template, self.cid or self.name).stdout.strip()

    def running(self) -> bool:
        return self.state("{{.State.Running}}") == "true"

    def exit_code(self) -> int:
        return int(self.state("{{.State.ExitCode}}"))

    def health(self) -> str:
        return self.state("{{if .State.Health}}{{.State.Health.Status}}{{end}}")

    def logs(self) -> str:
        done = docker("logs", self.cid or self.name, check=False)
        return done.stdout + done.stderr

    def changed_paths(self) -> list[str]:
        """`docker diff`: every path the container added, changed or deleted in the image's filesystem."""
        lines = docker("diff", self.cid or self.name).stdout.splitlines()
        return [line.split(" ", 1)[1] for line in lines if line.strip()]

    def main_pid(self) -> int:
        return int(self.state("{{.State.Pid}}"))

    def engine_pids(self) -> list[int]:
        """Host PIDs of vLLM's EngineCore processes (children of the server, which is the container's PID 1)."""
        return engine_core_children(self.main_pid())

    def worker_pids(self) -> dict[str, int]:
        """Host PIDs of vLLM's worker processes (children of each EngineCore), by their title: "VLLM::Worker_TP1".

        Read from /proc/PID/cmdline, which setproctitle rewrites; /proc/PID/comm keeps 15 characters, too few to tell
        Worker_TP0 from Worker_TP1."""
        found: dict[str, int] = {}
        for engine in self.engine_pids():
            children = Path(f"/proc/{engine}/task/{engine}/children").read_text().split()
            for pid in map(int, children):
                try:
                    title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode().strip()
                except OSError:
                    continue
                if title.startswith("VLLM::Worker"):
                    found[title] = pid
        return found

    def wait_exit(self, timeout: float) -> int:
        """Block until the container stops (or `timeout` passes, then fail); its exit code."""
        done = docker("wait", self.cid or self.name, timeout=timeout)
        return int(done.stdout.strip())

    def remove(self) -> None:
        docker("rm", "-f", self.cid or self.name, check=False)
