"""The body-check benchmark: it measures every shape against json.loads in the same run and appends CSV rows."""

from __future__ import annotations

import csv

import pytest

from benchmarks.serving import bench_body_parse


def test_every_body_is_accepted_and_measured_against_its_decoding(tmp_path, capsys) -> None:
    assert bench_body_parse.main(["--reps", "2", "--out", str(tmp_path)]) == 0
    assert bench_body_parse.main(["--reps", "2", "--out", str(tmp_path)]) == 0  # a second run appends
    rows = list(csv.DictReader((tmp_path / "bench_body_parse.csv").open(encoding="utf-8")))
    assert [row["body"] for row in rows] == list(bench_body_parse.bodies()) * 2
    for row in rows:
        ratio = float(row["classify_us"]) / float(row["decode_us"])
        assert float(row["classify_over_decode"]) == pytest.approx(ratio, rel=1e-2)
        assert row["reps"] == "2" and row["python"]
    assert "classify_body" in capsys.readouterr().out


def test_one_timing_is_refused_naming_the_flag(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        bench_body_parse.main(["--reps", "1"])
    assert caught.value.code == 2 and "--reps 1" in capsys.readouterr().err
