"""The served-configuration benchmark (benchmarks/e2e/served*.py, httpload, tokenizer): rows run what `serve` runs.

The plan row's argv and environment must be exactly what `python -m entrypoint serve` would exec for the same
settings; the comparison rows differ in the MoE backend switch only. The HTTP load generator is checked against a
real local server that streams; the whole harness runs once on the CPU engine with the tiny model (marked e2e).
"""

from __future__ import annotations

import csv
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.e2e import httpload, logparse, runner, served, start_rows, tokenizer
from benchmarks.e2e.backends import FOLD_ENV, GEMM1_PDL_ENV, TUNED_ENV, EngineSetup
from benchmarks.e2e.logparse import start_durations
from entrypoint.inputs.gather import build_plan
from entrypoint.serve import vllm_command, vllm_environment
from tests.conftest_paths import REPO

QWEN = REPO / "benchmarks" / "e2e" / "models" / "qwen3-30b-a3b-fp8-static"
OPTIONS = served.bench_options(max_model_len=784, max_num_seqs=64, gpu_memory_utilization=0.9, compile_mode="default")


def command(setup: EngineSetup, options: dict[str, str] = OPTIONS) -> served.ServedCommand:
    return served.served_command(QWEN, setup, dict(os.environ), port=18080, options=options, gpu="H200")


def flag(argv: tuple[str, ...], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_plan_row_is_exactly_what_serve_execs_for_the_same_settings() -> None:
    row = command(EngineSetup("plan", "triton"))
    environ = {**os.environ, "MOE_SERVING_DEFAULT_PROPERTIES": str(served.IMAGE_DEFAULT_PROPERTIES), **OPTIONS}
    plan = build_plan(model=str(QWEN), environ=environ, host="127.0.0.1", port=18080, gpu="H200")
    assert row.argv == tuple(vllm_command(plan))
    assert row.env == vllm_environment(plan, environ)
    assert row.argv[1:4] == ("-m", "entrypoint.serve", "serve")  # the module serve execs, nothing of its own
    assert row.moe_backend == row.plan_moe_backend == "triton" and TUNED_ENV in row.env


@pytest.mark.parametrize("switch", [FOLD_ENV, GEMM1_PDL_ENV])
def test_only_the_comparison_row_gets_its_switch_even_exported(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(switch, "1")  # left in the shell by someone: the plan row must still be what serve runs
    plan_row = command(EngineSetup("plan", "triton"))
    fold_row = command(EngineSetup("plan_fold", "triton", env={**plan_row.env, switch: "1"}))
    assert switch not in plan_row.env
    assert fold_row.env[switch] == "1" and sorted(fold_row.argv) == sorted(plan_row.argv)  # the switch moves


def test_the_benchmarks_needs_reach_vllm_as_a_users_options_would() -> None:
    argv = command(EngineSetup("plan", "triton")).argv
    assert flag(argv, "--load-format") == "dummy" and flag(argv, "--max-num-seqs") == "64"
    assert flag(argv, "--max-model-len") == "784" and flag(argv, "--gpu-memory-utilization") == "0.9"
    assert "--compilation-config" not in argv and "--enforce-eager" not in argv  # vLLM's defaults: what ships
    assert "--enable-prefix-caching" in argv  # the image default serving.properties is read, as in the image


def test_compile_none_is_an_explicit_compilation_config_and_nothing_else() -> None:
    none = served.bench_options(max_model_len=784, max_num_seqs=8, gpu_memory_utilization=0.9, compile_mode="none")
    argv = command(EngineSetup("plan", "triton"), none).argv
    assert json.loads(flag(argv, "--compilation-config") or "{}") == {
        "mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 8,
    }  # fmt: skip
    with pytest.raises(ValueError, match="compile mode 'eager'"):
        served.bench_options(max_model_len=1, max_num_seqs=1, gpu_memory_utilization=0.9, compile_mode="eager")


@pytest.mark.parametrize(
    ("setup", "moe_backend", "tuned"),
    [
        (EngineSetup("auto", None, unset_env=(TUNED_ENV,)), "auto", False),
        (EngineSetup("triton", "triton", unset_env=(TUNED_ENV,)), "triton", False),
        (EngineSetup("triton_tuned", "triton", env={TUNED_ENV: "/configs"}), "triton", True),
    ],
    ids=["auto drops the switch", "triton on vLLM's default tiles", "triton with a tile folder"],
)
def test_a_comparison_row_changes_the_moe_backend_switch_only(setup: EngineSetup, moe_backend: str, tuned: bool):
    plan, row = command(EngineSetup("plan", "triton")), command(setup)
    assert row.moe_backend == moe_backend and row.argv.count("--moe-backend") == (moe_backend != "auto")
    assert served.with_moe_backend(row.argv, None) == served.with_moe_backend(plan.argv, None)
    assert (TUNED_ENV in row.env) == tuned
    assert {k: v for k, v in row.env.items() if k != TUNED_ENV} == {k: v for k, v in plan.env.items() if k != TUNED_ENV}


def test_with_moe_backend_replaces_both_spellings() -> None:
    assert served.with_moe_backend(("m", "--moe-backend", "x", "--y"), "t") == ("m", "--y", "--moe-backend", "t")
    assert served.with_moe_backend(("m", "--moe-backend=x"), None) == ("m",)
    assert served.moe_backend_of(("m", "--moe-backend=x")) == "x" and served.moe_backend_of(("m",)) == "auto"


def test_the_word_tokenizer_gives_one_token_per_word_and_decodes_any_id(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vocab_size": 1000, "max_position_embeddings": 128}))
    made = tokenizer.prepare_model_dir(model, tmp_path / "work")
    assert tokenizer.prepare_model_dir(model, tmp_path / "work") == made  # made once, then reused
    tok = AutoTokenizer.from_pretrained(made)
    ids = [5, 999, 100, 42]
    assert tok(tokenizer.words(ids), add_special_tokens=False)["input_ids"] == ids
    assert tok.decode(ids) == "w5 w999 w100 w42" and len(tok) == 1000


def test_start_durations_read_vllms_own_lines() -> None:
    log = "\n".join([
        "(EngineCore pid=1) INFO [default_loader.py:1] Loading weights took 3.10 seconds",
        "INFO [gpu_model_runner.py:2] Model loading took 29.01 GiB memory and 3.55 seconds",
        "INFO [backends.py:3] Compiling a graph for compile range (1, 8192) takes 20.50 s",
        "INFO [backends.py:3] Compiling a graph for compile range (1, 1) takes 1.50 s",
        "INFO [monitor.py:4] torch.compile takes 36.70 s in total",
        "INFO [gpu_model_runner.py:5] Graph capturing finished in 8 secs, took 0.51 GiB",
        "INFO [core.py:6] init engine (profile, create kv cache, warmup model) took 60.10 seconds",
        "(APIServer pid=2) INFO [warmup_gate.py:7] warm-up: done after 6.3 s; /ping answers 200",
    ])  # fmt: skip
    assert start_durations(log) == {
        "weights_s": 3.1, "model_load_s": 3.55, "graph_compile_s": 22.0, "torch_compile_total_s": 36.7,
        "cuda_graphs_s": 8.0, "init_engine_s": 60.1, "warmup_s": 6.3,
    }  # fmt: skip


def test_process_gaps_split_what_vllm_does_not_time_by_its_log_stamps() -> None:
    # the head of 2026-12-03's warm start with fork (that run's engines.log), launched 26 s before its first line
    log = "\n".join([
        "INFO 12-03 06:39:48 [hook.py:83] moe_kernel=project: ... dispatches to ops.fused_moe_fp8 by token count",
        "(APIServer pid=3462) INFO 12-03 06:39:48 [api_utils.py:345]  version 0.26.0",
        "(APIServer pid=3462) WARNING 12-03 06:39:48 [system_utils.py:299] Found ulimit of 20000",
        "(EngineCore pid=3550) INFO 12-03 06:39:51 [core.py:116] Initializing a V1 LLM engine (v0.26.0)",
        "(EngineCore pid=3550) INFO 12-03 06:40:08 [monitor.py:81] Initial profiling/warmup run took 0.81 s",
    ])  # fmt: skip
    launched = time.mktime(time.strptime("2026-12-03 06:39:22", "%Y-%m-%d %H:%M:%S"))
    assert logparse.process_gaps(log, launched) == {"before_first_log_s": 26.0, "to_engine_core_s": 3.0}
    # no engine core (the CPU engine runs in-process): only the first part; no vLLM line at all: nothing
    in_process = log.split("\n(EngineCore")[0]
    assert logparse.process_gaps(in_process, launched) == {"before_first_log_s": 26.0}
    assert logparse.process_gaps("Traceback (most recent call last):", launched) == {}
    # the served worker's event carries the launch, and the start row gets both parts
    result = runner.collect("ok", [{"event": "engine_started", "start_s": 64.2, "launched_at": launched}], log, 70.0)
    row = start_rows.start_row("m", "plan", "warm", result, "default")
    assert (row["before_first_log_s"], row["to_engine_core_s"]) == (26.0, 3.0)
    assert row["launched_at_epoch_s"] == launched  # what joins the start with the CPU probe sampled beside it


# ------------------------------------------------------------------------------------ the load generator


class _Streams(http.server.BaseHTTPRequestHandler):
    """Streams N token lines 20 ms apart, in either wire format; the path picks it."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = body["max_tokens"]
        lines = []
        for i in range(n):
            if self.path == "/sse":
                lines.append("data: " + json.dumps({"choices": [{"text": f" w{i}"}]}))
            else:
                lines.append(json.dumps({"token": {"id": i, "text": f" w{i}"}, "generated_text": None}))
        if self.path == "/sse":
            lines += ["data: " + json.dumps({"choices": [], "usage": {"completion_tokens": n}}), "data: [DONE]"]
        for line in lines:
            chunk = (line + "\n\n" if self.path == "/sse" else line + "\n").encode()
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
            time.sleep(0.02)
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stream_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Streams)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize(("path", "wire"), [("/sse", "sse"), ("/jsonl", "jsonlines")])
def test_run_batch_times_every_stream_and_counts_its_tokens(stream_server: int, path: str, wire: str) -> None:
    results, wall = httpload.run_batch(stream_server, path, [{"max_tokens": 5}] * 4, wire)
    assert [r.status for r in results] == [200] * 4 and all(not r.error for r in results)
    assert [r.num_output_tokens for r in results] == [5] * 4
    for r in results:
        timing = r.timing()
        assert 0 <= timing["ttft_s"] < timing["ttft_s"] + 0.07 <= timing["last_token_ts"] - r.submit_ts
    assert wall >= 0.08


def test_an_error_line_in_a_stream_is_reported_not_counted() -> None:
    with pytest.raises(RuntimeError, match="error line"):
        httpload._tokens_in(json.dumps({"code": 503, "error": "engine stopped"}), "jsonlines")
    with pytest.raises(RuntimeError, match="error event"):
        httpload._tokens_in('data: {"error": {"message": "x"}}', "sse")


# ------------------------------------------------------------------------------------ the whole harness, CPU

# vLLM 0.32's CPU MoE kernel (experts/cpu_moe.py -> torch.ops._C.cpu_fused_moe) takes int32 expert ids, and the
# routing simulator returns int64 where the caller asks no index type: with it the CPU engine dies at the first
# request ("expected scalar type Int but found Long"). The CPU rows are functional checks, never measurements.
CPU_ROUTING = ("--routing", "dummy")
NO_FLOOR = "no floor (no bandwidth measured, a split or fewer layers)"


@pytest.mark.e2e
def test_the_served_harness_measures_the_tiny_model_on_the_cpu_engine(tmp_path: Path) -> None:
    from entrypoint.model.tiny_model import ensure_tiny_model
    from entrypoint.run_local import CPU_ENV_DEFAULTS, tiny_model_dir

    model = ensure_tiny_model(tiny_model_dir(dict(os.environ)))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "benchmarks.e2e", "run", "--models", str(model), "--backends", "plan",
            "--conc", "1,2", "--input-len", "16", "--output-len", "8", "--long-input-len", "0", "--reps", "1",
            "--stream-check", "2:16:8:1", "--out-dir", str(out), "--work-dir", str(tmp_path / "work"),
            "--budget-s", "400", "--share-triton-cache", "--profile-conc", "2", "--profile-tokens", "4",
            "--profile-reps", "2", *CPU_ROUTING]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env={**os.environ, **CPU_ENV_DEFAULTS}, capture_output=True, text=True,
                          timeout=500)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = list(csv.DictReader((out / "h200_e2e.csv").open()))
    assert [(r["conc"], r["status"], r["compile"]) for r in rows] == [("1", "ok", "default"), ("2", "ok", "default")]
    assert all(float(r["decode_tps_best"]) > 0 for r in rows)
    # the real engine's busiest thread is metered into every row (49-54 % of a core in CI, 2026-12-06)
    assert all(r["host_bound"] in ("yes", "no") and float(r["engine_thread_pct"]) > 0 for r in rows), rows
    # every row records its routing; no GPU, no bandwidth, no floor; the dummy routing at 2 is a labelled control
    assert {(r["routing"], r["routing_logged"], r["floor_check"]) for r in rows} == {("dummy", "", NO_FLOOR)}
    assert "HBM read bandwidth: not measured" in done.stdout
    table = (out / "h200_e2e.md").read_text().splitlines()
    # a CPU engine's thread may hold a core: a "; host-bound (...)" label may follow (benchmarks/e2e/host_bound.py)
    assert ["| ok; control (dummy routing): not published" in line for line in table[2:4]] == [False, True]
    # the first engine of a run starts from empty caches; what it compiled is then offered to the next one
    assert {r["start_caches"] for r in rows} == {"empty"}
    assert "plan: 0 Triton kernels added to the run's shared cache (0 in all)" in done.stdout, done.stdout[-2000:]
    ways = {r["way"]: r for r in csv.DictReader((out / "stream_check.csv").open())}
    assert set(ways) == {"lmi_jsonlines_invocations", "openai_sse_invocations", "openai_sse_v1_completions"}
    assert all(r["failed"] == "0" and float(r["output_tps_median"]) > 0 for r in ways.values())
    # every measured batch records the host side of its engine (benchmarks/e2e/host_meter.py): the CPU engine's
    # process under the API server worked, and the engine's own inter-token latency covers each request's tokens
    (result,) = json.loads((out / "h200_e2e_raw.json").read_text())
    samples = [s for s in result["samples"] if s.get("event") == "sample"]
    assert len(samples) == 2
    for sample in samples:
        assert sample["engine_cpu_s"] >= sample["engine_top_thread_cpu_s"] > 0, sample
        assert sample["server_itl_count"] == sample["conc"] * (8 - 1) and sample["server_itl_sum_s"] > 0, sample
    # after the measured rows, two batches under vLLM's torch profiler; each one's traces moved into its own folder
    for rep in (1, 2):
        traces = list((out / "profiles").glob(f"*.plan.cold/conc2-rep{rep}/*"))
        assert traces and all(t.stat().st_size > 0 for t in traces), sorted((out / "profiles").rglob("*"))


@pytest.mark.e2e
def test_a_pinned_row_runs_its_engine_where_pinned_and_says_so(tmp_path: Path) -> None:
    """--pin (benchmarks/e2e/pinning.py) on the CPU engine: the engine process under the API server is pinned once
    the server answers, the row carries the setting and its table line says it is a comparison row."""
    from entrypoint.model.tiny_model import ensure_tiny_model
    from entrypoint.run_local import CPU_ENV_DEFAULTS, tiny_model_dir

    cpus = sorted(os.sched_getaffinity(0))
    everything = f"{cpus[0]}-{cpus[-1]}" if cpus == list(range(cpus[0], cpus[-1] + 1)) else str(cpus[0])
    pin = f"api={cpus[0]};engine={everything};client={cpus[-1]}"
    model = ensure_tiny_model(tiny_model_dir(dict(os.environ)))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "benchmarks.e2e", "run", "--models", str(model), "--backends", "plan",
            "--conc", "1", "--input-len", "16", "--output-len", "4", "--long-input-len", "0", "--reps", "1",
            "--out-dir", str(out), "--work-dir", str(tmp_path / "work"), "--budget-s", "300", "--pin", pin,
            *CPU_ROUTING]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env={**os.environ, **CPU_ENV_DEFAULTS}, capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = csv.DictReader((out / "h200_e2e.csv").open())
    assert (row["status"], row["pinning"]) == ("ok", pin)
    assert f"pinned ({pin}): comparison row |" in (out / "h200_e2e.md").read_text()
    (result,) = json.loads((out / "h200_e2e_raw.json").read_text())
    pinned = result["pinned"]
    assert pinned["spec"] == pin and set(pinned["allowed"]) == {"api", "engine", "client"}
    assert pinned["allowed"]["engine"] and set(pinned["allowed"]["engine"].values()) == {everything}
    assert list(pinned["allowed"]["api"].values()) == [str(cpus[0])]


@pytest.mark.e2e
def test_the_start_breakdown_probes_the_baked_start_with_real_requests(tmp_path: Path) -> None:
    """The baked start (start only) sends one short batch per workload shape and counts what that compiled: the
    path that checks "zero MoE-kernel JIT after start" per rank on the 8-GPU host, run here on the CPU engine."""
    from entrypoint.model.tiny_model import ensure_tiny_model
    from entrypoint.run_local import CPU_ENV_DEFAULTS, tiny_model_dir

    model = ensure_tiny_model(tiny_model_dir(dict(os.environ)))
    out, baked = tmp_path / "out", tmp_path / "baked"
    baked.mkdir()
    argv = [sys.executable, "-m", "benchmarks.e2e", "run", "--models", str(model), "--backends", "plan",
            "--conc", "1,2", "--input-len", "16", "--output-len", "4", "--long-input-len", "0", "--reps", "1",
            "--start-breakdown", "plan", "--baked-cache", str(baked), "--layer-start", "--start-pairs", "1",
            "--out-dir", str(out),
            "--work-dir", str(tmp_path / "work"), "--budget-s", "600", *CPU_ROUTING]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env={**os.environ, **CPU_ENV_DEFAULTS}, capture_output=True, text=True,
                          timeout=700)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    starts = {r["mode"]: r for r in csv.DictReader((out / "start_breakdown.csv").open())}
    # then one more pair, alternating: a warm start on the same caches, a start from a fresh seed of the same layer
    assert list(starts) == ["empty", "warm", "copied", "baked", "layer", "warm 2", "layer 2"]
    assert all(r["status"] == "ok" and r["split"] == "tp1" for r in starts.values())
    assert {r["options"] for r in starts.values()} == {"max_num_seqs=2 max_model_len=36"}  # how it was sized
    # the launch to vLLM's first log line, from the served worker's launch time (no engine core: in-process here)
    assert all(0 <= float(r["before_first_log_s"]) < float(r["start_s"]) for r in starts.values()), starts
    raw = json.loads((out / "h200_e2e_raw.json").read_text())
    assert raw[0]["split"] == "tp1" and raw[0]["argv"][1:4] == ["-m", "entrypoint.serve", "serve"]
    events = [json.loads(line) for line in (tmp_path / "work" / f"{model.name}.plan.baked.jsonl").open()]
    (probe,) = [e for e in events if e["event"] == "serving_compiles"]
    assert probe["jit_probe_requests_ok"] == 3  # one batch of 1 and one of 2: every request answered
    assert "triton_compiled_while_serving_by_rank" in probe
    # vLLM's model-info entries, baked once as the image build bakes them and seeded by every start as serve does
    assert "e2e: model info: " in done.stdout and " entries for " in done.stdout, done.stdout[-3000:]
    copied = {p.name.split(".")[-2]: int(n) for p in (tmp_path / "work").glob(f"{model.name}.plan.*.log")
              for n in re.findall(r"model info: (\d+) baked entries copied into", p.read_text())}  # fmt: skip
    # all into an empty cache root; none where the cache is the cold start's (warm) or a copy of it, nor into the
    # layer's: its bake seeded them as serve does, so the layer carries them
    assert copied["warm"] == copied["copied"] == copied["warm-2"] == 0 and copied["cold"] == copied["baked"] > 100
    assert copied["layer"] == copied["layer-2"] == 0, copied
    # the layer: made by `python -m entrypoint bake-cache` with the row's options, and seeded as serve seeds it
    assert "plan: bake-cache " in done.stdout and "compile cache: seeded VLLM_CACHE_ROOT" in done.stdout, done.stdout
    layer = [json.loads(line) for line in (tmp_path / "work" / f"{model.name}.plan.layer.jsonl").open()]
    (probe,) = [e for e in layer if e["event"] == "serving_compiles"]
    assert probe["jit_probe_requests_ok"] == 3 + 8  # the workload shapes, then one seeded batch of 8 (CPU engine)
    # the pair's layer start times the start only: its seed is fresh (the same entries copied), nothing is probed
    again = [json.loads(line) for line in (tmp_path / "work" / f"{model.name}.plan.layer-2.jsonl").open()]
    assert not [e for e in again if e["event"] == "serving_compiles"] and starts["layer 2"]["status"] == "ok"
