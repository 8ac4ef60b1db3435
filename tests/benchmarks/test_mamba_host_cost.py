"""benchmarks.e2e.mamba_host_cost against the installed vLLM (the CPU build): both cache modes timed, the CSV written,
and the lookup it times still does what the docs say: `none` hands the block table back, `align` picks each request's
state block."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.e2e import mamba_host_cost


def test_both_modes_are_timed_into_the_csv(tmp_path: Path) -> None:
    out = tmp_path / "cost.csv"
    assert mamba_host_cost.main(["--calls", "20", "--reps", "2", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["mode"] for r in rows] == ["none", "align"]
    assert all(float(r["us_per_call_median"]) > 0 for r in rows)


def test_the_timed_lookup_is_the_one_the_docs_describe() -> None:
    import torch
    from vllm.v1.attention.backends.utils import mamba_get_block_table_tensor
    from vllm.v1.kv_cache_interface import MambaSpec

    table = torch.arange(8, dtype=torch.int32).reshape(1, 8)
    seq_lens = torch.tensor([2500], dtype=torch.int32)
    none = MambaSpec(block_size=1024, shapes=((4, 4),), dtypes=(torch.float32,), mamba_cache_mode="none")
    align = MambaSpec(block_size=1024, shapes=((4, 4),), dtypes=(torch.float32,), mamba_cache_mode="align")
    assert mamba_get_block_table_tensor(table, seq_lens, none, "none") is table
    # token 2500 lives in block (2500 - 1) // 1024 = 2 of the request's table
    assert mamba_get_block_table_tensor(table, seq_lens, align, "align").flatten().tolist() == [2]


@pytest.mark.parametrize("argv", [["--calls", "0"], ["--reps", "0"]])
def test_a_count_below_one_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        mamba_host_cost.main(argv)
    assert exit_info.value.code == 2
