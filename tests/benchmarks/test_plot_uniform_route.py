"""benchmarks.kernels.plot_uniform_route: the bench's timings joined with the committed code counts, at one token."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.kernels import bench_uniform_route as bench
from benchmarks.kernels import plot_uniform_route as plot
from benchmarks.paths import KERNEL_RESULTS

CODE = KERNEL_RESULTS / "cpu_uniform_route_code.csv"  # committed: counted on a machine without a GPU


def times_csv(tmp_path: Path, ms: tuple[int, ...] = (1, 64)) -> Path:
    """Timings shaped as the bench writes them: µs = 1 + index of the variant, + M / 64."""
    rows = []
    for condition in bench.CONDITIONS:
        for experts, top_k in bench.SHAPES:
            for m in ms:
                row = {"condition": condition, "experts": experts, "top_k": top_k, "M": m}
                for i, v in enumerate(bench.VARIANTS):
                    row[f"{v}_us"], row[f"{v}_spread"] = 1.0 + i + m / 64, 0.02
                rows.append(row)
    path = tmp_path / "times.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=bench.COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_each_variant_at_one_token_gets_its_instruction_count(tmp_path: Path) -> None:
    with CODE.open() as f:
        code = list(csv.DictReader(f))
    with times_csv(tmp_path).open() as f:
        rows = plot.join(list(csv.DictReader(f)), code)
    assert len(rows) == len(bench.CONDITIONS) * len(bench.SHAPES) * len(bench.VARIANTS)  # M = 64 left out
    by_key = {(r["condition"], r["experts"], r["variant"]): r for r in rows}
    floyd = by_key[("cold_code", 128, "floyd")]
    assert floyd["instructions"] == 584 and floyd["us"] == 1.0 + list(bench.VARIANTS).index("floyd") + 1 / 64
    assert by_key[("warm", 128, "topk_tile")]["instructions"] == 6048
    assert by_key[("cold", 8, "vllm_three")]["instructions"] is None  # torch's kernels: not counted
    assert "| cold_code | 128 / 8 | floyd | 584 |" in plot.markdown(rows)


def test_a_variant_without_a_count_is_refused_naming_it(tmp_path: Path) -> None:
    code = [{"experts": "128", "top_k": "8", "variant": "topk_tile", "instructions": "6032"}]
    with times_csv(tmp_path, ms=(1,)).open() as f:
        times = [r for r in csv.DictReader(f) if r["experts"] == "128"]
    with pytest.raises(ValueError, match="no instruction count for no_atomic at 128/8"):
        plot.join(times, code)


def test_main_writes_the_table_and_the_plot_and_refuses_a_bad_csv(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png, md = tmp_path / "u.png", tmp_path / "u.md"
    argv = ["--times", str(times_csv(tmp_path)), "--code", str(CODE), "--png", str(png), "--md", str(md)]
    assert plot.main(argv) == 0
    assert png.stat().st_size > 10_000 and md.read_text().startswith("| condition |")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert plot.main(["--times", str(tmp_path / "bad.csv"), "--code", str(CODE), "--png", str(png)]) == 2


def test_the_title_names_the_gpu_the_timings_came_from() -> None:
    assert plot.gpu_of([{"gpu": "NVIDIA H100 80GB HBM3"}, {"gpu": "NVIDIA H100 80GB HBM3"}]) == "NVIDIA H100 80GB HBM3"
    assert plot.gpu_of([{"gpu": ""}]) == "an unnamed GPU"
