"""The served engine's decode steps under vLLM's torch profiler, at a few concurrencies (issue 33's first step).

`--profile-conc 1,8` on the harness (served engine only) adds `option.profiler_config` to every served row, the
`--profiler-config` vLLM 0.32 takes: the torch profiler, traces into the run's work dir, no Python stacks or shapes
(they would slow the profiled steps). After a row's measured repetitions, its worker (served_worker.py) calls
`capture`: per concurrency (`--profile-reps` times each), POST /start_profile, one batch of that many requests, POST
/stop_profile, then it moves the trace files vLLM wrote into the row's own folder, one subfolder per batch. The rows'
figures are measured before the profiler ever starts. Several batches per concurrency compare a slow batch's steps
with a fast one's, where one engine's repetitions jitter (Nemotron-3-Nano, docs/results/nemotron.md).
`benchmarks/e2e/profile_trace.py` reads the traces.
"""

from __future__ import annotations

import http.client
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT_FOR_TRACE_S = 120.0  # the workers write (and gzip) their traces after /stop_profile returns


def trace_dir(work_dir: Path) -> Path:
    """Where vLLM writes the run's traces before each row's worker moves them away."""
    return work_dir / "profiles-raw"


def profiler_option(trace_dir: Path) -> str:
    """The value of option.profiler_config for traces under ``trace_dir`` (vLLM wants an absolute path)."""
    return json.dumps({
        "profiler": "torch",
        "torch_profiler_dir": str(trace_dir.resolve()),
        "torch_profiler_with_stack": False,
        "torch_profiler_record_shapes": False,
        "torch_profiler_use_gzip": True,
    })  # fmt: skip


def _post(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
    status = conn.getresponse().status
    conn.close()
    return status


def _files(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else {}


def _new_trace_files(folder: Path, before: dict[Path, int], clock: Callable[[], float] = time.monotonic) -> list[Path]:
    """Files that appeared under ``folder`` since ``before``, once their sizes held still for 2 s."""
    deadline, last, stable_since = clock() + WAIT_FOR_TRACE_S, {}, None
    while clock() < deadline:
        now = {p: s for p, s in _files(folder).items() if p not in before}
        if now and now == last:
            stable_since = stable_since or clock()
            if clock() - stable_since >= 2.0:
                return sorted(now)
        else:
            stable_since = None
        last = now
        time.sleep(0.5)
    return sorted(last)


def capture(
    job: dict[str, Any], port: int, send_batch: Callable[[int, int, int], None], emit: Callable[..., None]
) -> None:
    """``job["profile"]["reps"]`` profiled batches per concurrency, each its own trace folder (``conc8``, or
    ``conc8-rep2`` when there are several); ``send_batch(conc, input_len, output_len)``."""
    spec = job["profile"]
    raw, dest, reps = Path(spec["trace_dir"]), Path(spec["dest"]), int(spec.get("reps", 1))
    for conc in spec["concs"]:
        for rep in range(1, reps + 1):
            before = _files(raw)
            started = _post(port, "/start_profile")
            sent = time.monotonic()
            send_batch(conc, int(spec["input_len"]), int(spec["output_len"]))
            batch_s = time.monotonic() - sent
            stopped = _post(port, "/stop_profile")
            files = _new_trace_files(raw, before)
            target = dest / (f"conc{conc}" if reps == 1 else f"conc{conc}-rep{rep}")
            target.mkdir(parents=True, exist_ok=True)
            moved = [str(shutil.move(str(f), target / f.name)) for f in files]
            emit("profile", conc=conc, rep=rep, batch_s=round(batch_s, 3), start_status=started,
                 stop_status=stopped, files=moved)  # fmt: skip
