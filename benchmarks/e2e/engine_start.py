"""Engine start with the Triton MoE backend: empty vs baked vs warm Triton cache (issue 4, H200).

Three fresh processes start vLLM's offline engine on a random-weight model (`load_format="dummy"`),
`moe_backend="triton"`, our tuned tiles, and the compile setting of the first H200 figures (no
torch.compile, full CUDA graphs for decode batches 1..64):
  empty  empty TRITON_CACHE_DIR and VLLM_CACHE_ROOT: every Triton kernel JIT-compiles at start
  baked  empty writable caches + the image's baked cache read first (TRITON_CACHE_MANAGER)
  warm   the caches the `empty` run left behind (a second start on the same machine)
Each run reports its engine start (LLM() construction), the first request's TTFT (512 tokens in,
1 out), and how many Triton kernels it compiled (new entries in its writable Triton cache).

    python -m benchmarks.e2e.engine_start --model benchmarks/e2e/models/qwen3-30b-a3b-fp8-static \
        --baked-cache /opt/moe-serving/triton-cache --out-dir $OUT
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.e2e.jitcount import compiled_kernels
from benchmarks.e2e.runner import IMAGE_START_METHOD, PREWARM_FLASHINFER
from benchmarks.sigterm import exit_on_sigterm
from kernels.config_files import CONFIG_DIR
from kernels.triton_cache import TRITON_CACHE_MANAGER

REPO = Path(__file__).resolve().parents[2]
WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
from vllm import LLM, SamplingParams
import_s = time.perf_counter() - t0
t1 = time.perf_counter()
llm = LLM(model=sys.argv[1], load_format="dummy", skip_tokenizer_init=True, moe_backend="triton",
          max_num_seqs=64, max_model_len=4096, enable_prefix_caching=False, gpu_memory_utilization=0.85,
          compilation_config={"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 64})
start_s = time.perf_counter() - t1
sp = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0.0, detokenize=False)
t2 = time.perf_counter()
llm.generate([{"prompt_token_ids": [1000 + i % 20000 for i in range(512)]}], sp, use_tqdm=False)
ttft_s = time.perf_counter() - t2
print("RESULT " + json.dumps({"import_s": import_s, "start_s": start_s, "first_request_s": ttft_s}), flush=True)
"""


def count_compiled(cache_dir: Path) -> dict[str, int]:
    """Kernels compiled into a Triton cache, by name (benchmarks/e2e/jitcount.py: one binary per entry)."""
    return dict(compiled_kernels([cache_dir]).by_name)


def run_state(state: str, args: argparse.Namespace, caches: Path) -> dict[str, object]:
    triton_dir, vllm_dir = caches / "triton", caches / "vllm"
    if state == "empty":
        shutil.rmtree(caches, ignore_errors=True)
    if state == "baked":
        shutil.rmtree(caches, ignore_errors=True)
    triton_dir.mkdir(parents=True, exist_ok=True)
    vllm_dir.mkdir(parents=True, exist_ok=True)
    before = count_compiled(triton_dir)
    env = dict(os.environ)
    env.update(
        TRITON_CACHE_DIR=str(triton_dir),
        VLLM_CACHE_ROOT=str(vllm_dir),
        TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
        CUDA_CACHE_PATH=str(caches / "nv"),
        # Shared by all states and prebuilt before them (main), as in benchmarks/e2e: the FlashInfer sampler
        # JIT (~100 s) is a first-engine-on-the-machine cost, not a Triton one (docs/results/start-time.md).
        FLASHINFER_WORKSPACE_BASE=str(args.work_dir / "flashinfer"),
        VLLM_WORKER_MULTIPROC_METHOD=IMAGE_START_METHOD,
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONUNBUFFERED="1",
        VLLM_TUNED_CONFIG_FOLDER=str(args.config_dir.resolve()),
        PYTHONPATH=f"{REPO}:{env.get('PYTHONPATH', '')}",
    )
    env.pop("TRITON_CACHE_MANAGER", None)
    env.pop("MOE_BAKED_TRITON_CACHE", None)
    if state == "baked":
        env.update(TRITON_CACHE_MANAGER=TRITON_CACHE_MANAGER, MOE_BAKED_TRITON_CACHE=str(args.baked_cache))
    log_path = args.out_dir / f"engine_start_{state}.log"
    t0 = time.perf_counter()
    with log_path.open("w") as log:
        # Own session: on a timeout the whole group goes, vLLM's spawned EngineCore (holding the GPU) included.
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(args.model)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, _ = proc.communicate(timeout=args.timeout_s)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # an orphaned engine child must not outlive its state
    wall = time.perf_counter() - t0
    result: dict[str, object] = {"state": state, "rc": proc.returncode, "wall_s": round(wall, 1)}
    if state == "baked" and not any(args.baked_cache.glob("*/fused_moe_kernel.json")):
        result["warning"] = f"no baked fused_moe_kernel in {args.baked_cache}: this measured an empty cache"
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result.update({k: round(v, 2) for k, v in json.loads(line[7:]).items()})
    after = count_compiled(triton_dir)
    new = {k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)}
    result["triton_compiles"] = sum(new.values())
    result["fused_moe_compiles"] = new.get("fused_moe_kernel", 0)
    result["compiled_kernels"] = new
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--baked-cache", type=Path, default=Path("/opt/moe-serving/triton-cache"))
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR)
    parser.add_argument("--out-dir", type=Path, default=Path("out"))
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/engine-start"))
    parser.add_argument("--states", default="empty,baked,warm")
    parser.add_argument("--timeout-s", type=int, default=300)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    # A step's `timeout` (benchmarks/device/run_queue.sh) sends SIGTERM: unwind so the engine group is killed.
    exit_on_sigterm()
    results = []
    t0 = time.perf_counter()
    fi_env = dict(os.environ, FLASHINFER_WORKSPACE_BASE=str(args.work_dir / "flashinfer"))
    fi = subprocess.run([sys.executable, "-c", PREWARM_FLASHINFER], env=fi_env, check=False)
    results.append({"state": "flashinfer_jit", "rc": fi.returncode, "wall_s": round(time.perf_counter() - t0, 1)})
    print(json.dumps(results[-1]), flush=True)
    for state in args.states.split(","):
        caches = args.work_dir / ("baked" if state == "baked" else "shared")
        try:
            results.append(run_state(state, args, caches))
        except subprocess.TimeoutExpired:
            results.append({"state": state, "rc": "timeout", "wall_s": args.timeout_s})
        print(json.dumps(results[-1]), flush=True)
        (args.out_dir / "engine_start.json").write_text(json.dumps(results, indent=1))  # a cut run keeps these
    print(f"{'state':6} {'start_s':>8} {'first_req_s':>11} {'triton_compiles':>15} {'fused_moe':>9}")
    for r in results:
        print(
            f"{r['state']:6} {r.get('start_s', '-')!s:>8} {r.get('first_request_s', '-')!s:>11} "
            f"{r.get('triton_compiles', '-')!s:>15} {r.get('fused_moe_compiles', '-')!s:>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
