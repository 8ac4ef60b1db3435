"""What a served row's plan splits across GPUs, and the communication settings every multi-GPU row must carry.

The split is read from the argv the plan execs (`--tensor-parallel-size`, `--data-parallel-size`,
`--enable-expert-parallel`), so it follows `--option tensor_parallel_degree=...` and the image default
`tensor_parallel_degree=max` alike: that is the split vLLM looks its tuned Triton file up with.

NVLink multicast must stay off on the lent machines (the device tool's KINDS.md): a program that uses it can put
the host's shared GPUs out of service. NCCL, PyTorch symmetric memory and NVSHMEM have switches for it; vLLM 0.26
has one more user of multicast: with TP > 1 on Hopper it fuses all-reduce + RMSNorm through FlashInfer
(`fuse_allreduce_rms`, on at -O2) and its `auto` backend picks `mnnvl`, which calls cuMulticastCreate
(flashinfer/comm/mnnvl.py). `trtllm` keeps the fusion on without multicast (torch symmetric memory, whose multicast
TORCH_SYMM_MEM_DISABLE_MULTICAST turns off). A multi-GPU row whose environment lacks any of these is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from entrypoint.utils.argv import flag_value

MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
}
# Environment that decides how the ranks talk: recorded in every row (planned), next to what vLLM logged.
COMM_PREFIXES = (
    "NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_", "VLLM_ALLREDUCE_", "VLLM_FLASHINFER_ALLREDUCE_", "VLLM_ALL2ALL_",
)  # fmt: skip


@dataclass(frozen=True)
class Split:
    tp: int = 1
    dp: int = 1
    expert_parallel: bool = False

    @property
    def ranks(self) -> int:
        return self.tp * self.dp

    @property
    def moe_ranks(self) -> int:
        """The ranks the experts are split over: vLLM's EP group is TP × DP; without EP the width is split TP ways."""
        return self.ranks if self.expert_parallel else self.tp

    @property
    def label(self) -> str:
        """'tp8', 'tp8ep8', 'tp4dp2': the CSV's `split` column."""
        text = f"tp{self.tp}" + (f"dp{self.dp}" if self.dp > 1 else "")
        return text + (f"ep{self.ranks}" if self.expert_parallel else "")


def split_of(argv: Sequence[str]) -> Split:
    """The split an engine argv asks for (vLLM's defaults where a flag is absent)."""
    tp = int(flag_value(argv, "--tensor-parallel-size") or 1)
    dp = int(flag_value(argv, "--data-parallel-size") or 1)
    return Split(tp, dp, "--enable-expert-parallel" in argv)


def comm_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The communication settings in a server's environment (sorted by name)."""
    return {k: env[k] for k in sorted(env) if k.startswith(COMM_PREFIXES)}


def multicast_problems(env: Mapping[str, str]) -> list[str]:
    """What a multi-GPU server's environment lacks to keep NVLink multicast off; empty when nothing."""
    return [f"{k}={v} (is {env[k]!r})" if k in env else f"{k}={v} (unset)"
            for k, v in MULTICAST_OFF.items() if env.get(k) != v]  # fmt: skip
