"""The GPU sweep's CPU side: what it would time (the timing itself needs the H200)."""

from __future__ import annotations

from benchmarks.kernels.fused_moe_fp8_sweep import main
from kernels.shapes import shape_by_key
from ops.fused_moe_fp8 import default_config


def test_list_names_the_default_first_for_every_shape_and_m(capsys):
    shapes = ["qwen3-30b-a3b:tp1", "deepseek-v3:tp8"]
    assert main(["--list", "--shapes", ",".join(shapes), "--ms", "1,8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for key in shapes:
        s = shape_by_key(key)
        for m in (1, 8):
            mine = [ln.split()[-1] for ln in lines if ln.startswith(f"{key} M={m} ")]
            assert len(mine) >= 6
            assert mine[0] == default_config(m, s.e, s.topk, s.h, s.n).label()
    assert lines[-1] == f"{len(lines) - 1} configs"
