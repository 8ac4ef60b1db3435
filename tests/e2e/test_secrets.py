"""option.api_key on the real CPU engine: vLLM enforces the key it reads from VLLM_API_KEY on /v1, and the key is in no
process's command line (any user of a host reads those), only in the environment of the server's own processes."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tools.local_server import Server

API_KEY = "sk-e2e-secret-key-4711"


def _group_processes(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    pids.append(int(entry.name))
            except ProcessLookupError:
                continue
    return pids


def test_the_api_key_guards_v1_and_stays_off_every_command_line(tiny_model: Path, tmp_path: Path) -> None:
    server = Server(
        ["serve", "--model", str(tiny_model), "--host", "127.0.0.1"],
        tmp_path / "serve.log",
        env={"OPTION_API_KEY": API_KEY},
    ).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.get("/v1/models").status_code == 401
            assert client.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200
            # the SageMaker routes keep their contract (the key guards /v1 only, as vLLM documents it)
            assert client.get("/ping").status_code == 200
        assert server.proc is not None
        pids = _group_processes(server.proc.pid)
        assert len(pids) >= 2, pids  # the entrypoint exec'd into vLLM's server, and its engine core
        for pid in pids:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert API_KEY.encode() not in cmdline and b"--api-key" not in cmdline, cmdline
        log = server.log_path.read_text(errors="replace")
        assert API_KEY not in log
        assert "option.api_key → env VLLM_API_KEY" in log
    finally:
        server.stop()
