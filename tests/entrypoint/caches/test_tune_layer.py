"""entrypoint.caches.tune_layer: what `bake-cache` / `python -m entrypoint tune` tunes for a plan, on a fake timer (no
GPU here): the budget and decode-first order, resume after a kill, the progress bar, the files under vLLM's names, our
kernel's dispatch row by the 1.03x rule, and a plan reading the result (issue 32)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from entrypoint.caches import tune_layer
from entrypoint.inputs.gather import build_plan
from entrypoint.resolve.layer_files import LAYER_ENV, TUNED_DISPATCH_FILE, TUNED_FOLDER
from entrypoint.utils.errors import ConfigError
from kernels import config_files as cf
from kernels.dispatch import DispatchTable
from kernels.shapes import KernelShape
from kernels.tuning.dispatch_rows import KernelPair
from tests.conftest_paths import REPO

GLM = REPO / "benchmarks" / "e2e" / "models" / "glm-4.5-air-fp8-static"  # E=128, N=1408: no file in vLLM or the image
GLM_FILE = "E=128,N=1408,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
VERSIONS = {"triton": "3.7.1", "vllm": "0.32.0", "torch": "2.13.0", "gpu": "NVIDIA H200"}


def incumbent(shape: KernelShape, m: int) -> dict[str, int]:
    return dict(BLOCK_SIZE_M=16 if m <= 32 else 64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4,
                num_stages=3)  # fmt: skip


def cost(m: int, tile: dict) -> float:
    """One clear optimum (BLOCK_N=128, 4 stages, swap-AB at small M): the incumbent is never it."""
    c = 10.0 + abs(math.log2(tile["BLOCK_SIZE_N"] / 128)) * 3 + abs(tile["num_stages"] - 4) * 1.5
    c += 2.0 * (tile["BLOCK_SIZE_K"] == 256) + 0.5 * (tile["num_warps"] == 8)
    return c * (1 + m / 64) * (0.9 if cf.swap_ab_engaged(tile) and m <= 64 else 1.0)


# our kernel: a clear win at M = 1 and 2, a uniform-only win at 4 (hot routing loses), a loss from 8 on
PAIRS = {1: (10.0, 13.0, None, None), 2: (12.0, 14.0, 12.0, 13.5), 4: (15.0, 16.0, 16.0, 16.1), 8: (30, 20, 30, 20),
         16: (60, 30, 60, 30)}  # fmt: skip


class FakeBench:
    """A GPU bench whose every timing advances a fake clock by one second."""

    def __init__(self, clock: list[float], kill_after: int | None = None) -> None:
        self.clock, self.kill_after = clock, kill_after
        self.timings = 0
        self.compiled: list[int] = []

    def tick(self) -> None:
        if self.kill_after is not None and self.timings >= self.kill_after:
            raise KeyboardInterrupt("killed")
        self.timings += 1
        self.clock[0] += 1.0

    def incumbent_for(self, shape: KernelShape, m: int) -> dict[str, int]:
        return incumbent(shape, m)

    def precompile(self, shape, tiles_for, ms) -> int:
        self.compiled = list(ms)
        return sum(len(tiles_for(m)) for m in ms)

    def measure(self, shape: KernelShape, m: int, tile: dict, batches: int) -> float:
        self.tick()
        return cost(m, tile)

    def pair(self, shape: KernelShape, m: int, tile: dict) -> KernelPair:
        self.tick()
        ours, vllm, ours_hot, vllm_hot = PAIRS[m]
        config = {"pair_mode": True, "split_k": 4} if m == 1 else None  # the sweep beat the default at M = 1 only
        return KernelPair(m, ours, vllm, ours_hot, vllm_hot, config)


class Bar:
    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.done, self.closed = total, desc, 0, False

    def update(self, n: int) -> None:
        self.done += n

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def glm_plan():
    return build_plan(model=str(GLM), gpu="H200", vllm_version="0.32.0", environ={})


def tune(plan, layer: Path, budget_s: float, bench: FakeBench, bars: list[Bar] | None = None):
    target, _ = tune_layer.decide(plan, "auto")
    assert target is not None

    def progress(total: int, desc: str) -> Bar:
        bar = Bar(total, desc)
        if bars is not None:
            bars.append(bar)
        return bar

    return tune_layer.run_tune(target, layer, budget_s, bench, "NVIDIA H200", VERSIONS, "python -m entrypoint tune",
                               clock=lambda: bench.clock[0], progress=progress)  # fmt: skip


def test_the_plan_decides_what_is_tuned(glm_plan) -> None:
    target, reason = tune_layer.decide(glm_plan, "auto")
    assert target is not None and target.file_name == GLM_FILE
    assert target.decode_ms[:4] == (1, 2, 4, 8) and target.prefill_ms[-1] == 8192
    assert reason.startswith(f"tune: {GLM_FILE} at M=1,2,4,8,") and len(reason) < 200 and "docs/kernels.md" in reason
    assert tune_layer.decide(glm_plan, "off")[0] is None
    flashinfer = build_plan(model=str(GLM), gpu="H200", vllm_version="0.32.0",
                            environ={"OPTION_MOE_BACKEND": "flashinfer_cutlass"})  # fmt: skip
    target, reason = tune_layer.decide(flashinfer, "auto")
    assert target is None and "MoE backend is flashinfer_cutlass" in reason


@pytest.mark.parametrize(
    ("mode", "flavour", "gpu", "refused"),
    [
        ("on", None, False, True),
        ("auto", "cuda", False, True),  # the GPU image without a GPU: the layer would be made for the wrong machine
        ("auto", "cpu", False, False),  # the CPU image's layer: nothing to tune, the bake goes on
        ("auto", None, False, False),
        ("off", "cuda", False, False),
        ("on", "cuda", True, False),
    ],
)
def test_no_gpu_is_refused_where_tuning_is_asked_for(mode: str, flavour: str | None, gpu: bool, refused: bool) -> None:
    if not refused:
        tune_layer.require_gpu(mode, flavour, gpu, "bake-cache")
        return
    with pytest.raises(ConfigError) as err:
        tune_layer.require_gpu(mode, flavour, gpu, "bake-cache")
    assert "no NVIDIA GPU is visible" in str(err.value) and "--gpus all" in str(err.value)


def test_a_tune_planned_for_another_gpu_than_the_one_present_is_refused() -> None:
    tune_layer.require_planned_gpu("NVIDIA H200", "NVIDIA H200", "tune")
    tune_layer.require_planned_gpu("NVIDIA H200", "NVIDIA H200 NVL", "tune")  # vLLM's files name every H200 alike
    with pytest.raises(ConfigError) as err:
        tune_layer.require_planned_gpu("NVIDIA H200", "NVIDIA H100 80GB HBM3", "tune")
    said = str(err.value)
    assert "tune --gpu='NVIDIA H200'" in said and "not this host's GPU (NVIDIA H100 80GB HBM3)" in said
    assert "leave --gpu out" in said


def test_a_bad_mode_names_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match="bake-cache --tune='sometimes'.*auto, on, off"):
        tune_layer.require_gpu("sometimes", "cuda", True, "bake-cache")


def test_the_cli_refuses_without_a_gpu_with_exit_code_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "entrypoint", "tune", "--model", str(GLM), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "tune --tune='on': no NVIDIA GPU is visible" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / TUNED_FOLDER).exists()


def test_a_full_tune_writes_vllm_named_files_no_tile_slower_and_our_kernels_rows(glm_plan, tmp_path: Path) -> None:
    bars: list[Bar] = []
    bench = FakeBench([0.0])
    outcome = tune(glm_plan, tmp_path, 10_000, bench, bars)
    target = outcome.target
    assert outcome.untuned_ms == () and outcome.tuned_ms == tuple(sorted(target.ms))
    assert bench.compiled == list(target.ms)  # every candidate compiled before the first timing
    table = cf.read_config_file(tmp_path / TUNED_FOLDER / GLM_FILE)
    assert sorted(table) == sorted(target.ms)
    for m, tile in table.items():  # never slower than vLLM's tile, and better where the fake optimum is far
        assert cost(m, tile) <= cost(m, incumbent(target.shape, m))
    assert cost(1, table[1]) < 0.9 * cost(1, incumbent(target.shape, 1))
    provenance = cf.load_provenance(tmp_path / TUNED_FOLDER / "provenance.json")[GLM_FILE]
    assert provenance["gpu_version"] == "NVIDIA H200" and provenance["tuned_m"] == sorted(target.ms)
    # our kernel: M = 1 and 2 win under both routings, 4 only under uniform (not enough), 8 and 16 lose
    layer_table = json.loads((tmp_path / TUNED_FOLDER / TUNED_DISPATCH_FILE).read_text())
    row = layer_table["rows"][-1]
    assert row["token_ranges"] == [[1, 2]] and outcome.ours_ranges == ((1, 2),)
    assert [e["m"] for e in row["measured"]] == [1, 2, 4, 8, 16]
    assert row["measured"][0]["config"] == {"pair_mode": True, "split_k": 4} and "config" not in row["measured"][1]
    shipped = json.loads((REPO / "kernels" / "fused_moe_dispatch.json").read_text())["rows"]
    assert len(layer_table["rows"]) == len(shipped) + 1  # the image's rows kept, this shape's added
    # the progress bar counted every timing, and its total was not below it
    assert bars[0].done == bench.timings <= bars[0].total and bars[0].closed
    lines = tune_layer.summary_lines(outcome)
    assert "dispatched at M=1..2" in lines[-1] and all(len(line) < 400 for line in lines)


def test_a_budget_cut_keeps_decode_sizes_first_and_vllms_tiles_elsewhere(glm_plan, tmp_path: Path) -> None:
    bench = FakeBench([0.0])
    outcome = tune(glm_plan, tmp_path, 400, bench)
    target = outcome.target
    assert outcome.seconds <= 400 + 1  # one timing may start just before the deadline
    assert outcome.tuned_ms and outcome.untuned_ms
    assert outcome.tuned_ms == tuple(sorted(target.decode_ms[: len(outcome.tuned_ms)]))  # a prefix of decode order
    table = cf.read_config_file(tmp_path / TUNED_FOLDER / GLM_FILE)
    for m in outcome.untuned_ms:  # vLLM's own tile where the budget did not reach
        assert table[m] == incumbent(target.shape, m)
    assert outcome.pairs, "the dispatch check has its share of the budget even when the tiles do not finish"


def test_a_killed_tune_resumes_and_ends_where_an_uninterrupted_one_does(glm_plan, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    reference = FakeBench([0.0])
    tune(glm_plan, whole, 10_000, reference)
    killed = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        tune(glm_plan, killed, 10_000, FakeBench([0.0], kill_after=reference.timings // 2))
    assert not (killed / TUNED_FOLDER / GLM_FILE).exists()
    resumed = FakeBench([0.0])
    tune(glm_plan, killed, 10_000, resumed)
    assert 0 < resumed.timings <= reference.timings - reference.timings // 2
    assert (killed / TUNED_FOLDER / GLM_FILE).read_text() == (whole / TUNED_FOLDER / GLM_FILE).read_text()


def test_a_start_from_the_layer_uses_its_tiles_and_rows_with_one_reason_line_each(glm_plan, tmp_path: Path) -> None:
    tune(glm_plan, tmp_path, 10_000, FakeBench([0.0]))
    plan = build_plan(model=str(GLM), gpu="H200", vllm_version="0.32.0", environ={LAYER_ENV: str(tmp_path)})
    assert plan.env["VLLM_TUNED_CONFIG_FOLDER"] == str(tmp_path / TUNED_FOLDER)
    assert plan.env["MOE_SERVING_DISPATCH_TABLE"] == str(tmp_path / TUNED_FOLDER / TUNED_DISPATCH_FILE)
    assert plan.moe_kernel.value == "project"
    tuned = [r for r in plan.reasons if r.startswith("tuned configs:")]
    assert tuned and "tuned on this GPU at" in tuned[0] and "make cache-layer" in tuned[0]
    kernel = [r for r in plan.reasons if r.startswith("moe_kernel:")]
    assert kernel and "M=1..2" in kernel[0], kernel
    rows = DispatchTable.load(tmp_path / TUNED_FOLDER / TUNED_DISPATCH_FILE).rows  # what the plugin reads
    glm = next(r for r in rows.values() if r.key.experts == 128 and r.key.n == 1408)
    assert glm.kernel_config(1) == {"pair_mode": True, "split_k": 4} and glm.kernel_config(2) is None
    # before the tune, the same model runs vLLM's tiles and kernel: what LMI runs
    untuned = "no file for this shape in the image; vLLM's tiles run (tune: docs/kernels.md)"
    assert any(untuned in r for r in glm_plan.reasons)
    assert glm_plan.moe_kernel.value == "vllm"


def test_our_kernels_config_is_the_swept_one_only_beyond_the_margin() -> None:
    from kernels.tuning.dispatch_rows import choose_config

    assert choose_config([(10.0, "default"), (9.9, "a")], "default") == (10.0, "default")  # 1 %: within the noise
    assert choose_config([(10.0, "default"), (9.9, "a"), (9.7, "b")], "default") == (9.7, "b")  # 3 %
    assert choose_config([(10.0, "default"), (9.0, "a")], "default") == (9.0, "a")
    assert choose_config([(9.0, "a")], "default") == (9.0, "a")  # the default did not compile
    with pytest.raises(ValueError, match="no config"):
        choose_config([], "default")
