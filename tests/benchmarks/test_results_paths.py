"""Every benchmark writes its evidence under benchmarks/results/<suite>/ by default, and what they read from there
exists: a default path left pointing at a moved folder would write a new, unfiled results folder next to the code,
or make the GPU host's plan rows fall back to nothing."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.e2e import run_args as e2e_args
from benchmarks.kernels import (
    bench_fused_moe,
    bench_moe_configs,
    bench_rope_fp8,
    bench_uniform_route,
    uniform_route_code,
)
from benchmarks.paths import E2E_RESULTS, KERNEL_RESULTS, RESULTS, SERVING_RESULTS
from tests.conftest_paths import REPO
from tests.docker.build_context import checkout_files


def test_the_results_folders_are_under_benchmarks_and_hold_the_filed_runs():
    assert RESULTS == REPO / "benchmarks" / "results"
    for folder in (KERNEL_RESULTS, E2E_RESULTS, SERVING_RESULTS):
        assert (folder / "RUNS.md").is_file() or any(folder.glob("*.csv")), folder
    assert (KERNEL_RESULTS / "RUNS.md").is_file() and (E2E_RESULTS / "RUNS.md").is_file()


def test_no_results_folder_is_left_inside_a_code_folder():
    code = ("entrypoint/", "sagemaker_deploy/", "kernels/", "ops/", "tools/", "benchmarks/")
    strays = sorted(
        p
        for p in checkout_files()
        if p.startswith(code) and "/results/" in p and not p.startswith("benchmarks/results/")
    )
    assert strays == []


def test_the_e2e_run_writes_there_and_reads_its_plan_snapshot_from_there():
    assert e2e_args.DEFAULT_SNAPSHOT == E2E_RESULTS / "plans.json" and e2e_args.DEFAULT_SNAPSHOT.is_file()
    assert e2e_args.run_parser().get_default("out_dir") == E2E_RESULTS


def _default(main_module, dest: str):
    """The default of ``dest`` in a bench's argparse parser, read by running its main with --help captured."""
    captured: dict[str, object] = {}
    real = argparse.ArgumentParser.parse_args

    def spy(self, args=None, namespace=None):
        captured.update(vars(real(self, [], namespace)))
        raise SystemExit(0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", spy)
        with pytest.raises(SystemExit):
            main_module.main([])
    return captured[dest]


@pytest.mark.parametrize(
    "module, dest",
    [
        (bench_fused_moe, "out"),
        (bench_rope_fp8, "out"),
        (bench_moe_configs, "out_dir"),
        (bench_uniform_route, "out"),
        (uniform_route_code, "out"),
    ],
    ids=["bench_fused_moe", "bench_rope_fp8", "bench_moe_configs", "bench_uniform_route", "uniform_route_code"],
)
def test_the_kernel_benches_write_to_the_kernel_results_by_default(module, dest):
    assert _default(module, dest) == KERNEL_RESULTS
