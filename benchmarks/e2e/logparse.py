"""Read what vLLM said about an engine start: the MoE backend it chose, tuned-config use, start milestones.

The milestones say where a start that never finished got stuck (weights loaded? KV cache sized? FlashInfer
autotuner running, and on which op? CUDA graphs capturing?) — the question the Mixtral-8x7B FlashInfer
CUTLASS row raised.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

# "Using TRITON Fp8 MoE backend ..." on GPUs; "Using CPU Unquantized MoE backend ..." on the CPU build.
BACKEND_RE = re.compile(r"Using (\w+) (?:\w+ )?MoE backend out of potential backends: \[([^\]]*)\]")
DEFAULT_CONFIG_RE = re.compile(r"Using default MoE config\. Performance might be sub-optimal!")
# entrypoint.moe_plugin's one line per shape (or its refusal): present only when vLLM loaded the plugin
PROJECT_KERNEL_RE = re.compile(r"moe_kernel=project: (.+)")
TUNED_CONFIG_RE = re.compile(r"Using configuration from (\S+) for MoE layer")
# vLLM's routing simulator, once per process that routes (fused_moe/router/routing_simulator_router.py)
ROUTING_RE = re.compile(r"Simulating MoE routing using a (\S+) strategy")
# How the ranks talk, as vLLM (and NCCL, with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV) logged it: vLLM 0.26
# pynccl.py, flashinfer_all_reduce.py, symm_mem.py, custom_all_reduce.py; NCCL's "NCCL_X set by environment to Y."
COMM_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nccl", re.compile(r"vLLM is using nccl==(\S+)")),
    ("flashinfer_allreduce", re.compile(r"(?:Using|Auto-selected) flashinfer allreduce backend: (\w+)")),
    ("flashinfer_allreduce_failed", re.compile(r"Failed to initialize FlashInfer All Reduce workspace: ([^\n]{0,80})")),
    ("symm_mem", re.compile(r"SymmMemCommunicator: (symmetric memory multicast operations are not supported|"
                            r"symmetric memory initialization failed|World size \d+ not supported)")),
    ("custom_allreduce_disabled", re.compile(r"Custom allreduce is disabled ([^\n.]{0,80})")),
)  # fmt: skip
NCCL_ENV_RE = re.compile(r"\b(NCCL_\w+) set by environment to ([^\s.]+)")
AUTOTUNER_OP_RE = re.compile(r"\[AutoTuner\]: Tuning (\S+?):?(?:\s|$)", re.MULTILINE)  # tqdm: "Tuning OP: 40%|"

# In the order vLLM 0.26 reaches them during LLM(...) construction.
MILESTONES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("weights_loaded", re.compile(r"Loading weights took|Model loading took")),
    ("memory_profiled", re.compile(r"Memory profiling takes|Available KV cache memory")),
    ("kv_cache_allocated", re.compile(r"GPU KV cache size")),
    ("flashinfer_autotune_started", re.compile(r"Using FlashInfer autotune cache file|\[AutoTuner\]: Tuning")),
    ("flashinfer_autotune_done", re.compile(r"FlashInfer autotune cache loaded|Skipping FlashInfer autotune")),
    ("cuda_graphs_captured", re.compile(r"Graph capturing finished")),
    ("engine_ready", re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
)


@dataclass
class EngineLog:
    """Facts pulled from one engine's log."""

    moe_backend: str | None = None  # as vLLM logged it, e.g. "TRITON", "FLASHINFER_CUTLASS"
    potential_backends: tuple[str, ...] = ()
    default_moe_config: bool = False  # "Using default MoE config" seen: Triton ran on untuned tiles
    project_kernel: tuple[str, ...] = ()  # what the engine plugin said (PROJECT_KERNEL_RE), once per line
    tuned_config_files: tuple[str, ...] = ()
    milestones: list[str] = field(default_factory=list)
    autotuner_ops: tuple[str, ...] = ()
    durations: dict[str, float] = field(default_factory=dict)  # start_durations(): the parts of the start
    comm: dict[str, str] = field(default_factory=dict)  # comm_facts(): NCCL version, all-reduce paths, NCCL env
    routing: str = ""  # the simulator strategy vLLM said it routes with; "" where it routed with the weights

    @property
    def last_milestone(self) -> str:
        return self.milestones[-1] if self.milestones else "none"


def parse_engine_log(text: str) -> EngineLog:
    log = EngineLog()
    backend = BACKEND_RE.search(text)
    if backend:
        log.moe_backend = backend.group(1)
        log.potential_backends = tuple(
            part.strip().strip("'\"") for part in backend.group(2).split(",") if part.strip()
        )
    log.default_moe_config = DEFAULT_CONFIG_RE.search(text) is not None
    log.project_kernel = tuple(dict.fromkeys(m.strip() for m in PROJECT_KERNEL_RE.findall(text)))
    log.tuned_config_files = tuple(dict.fromkeys(TUNED_CONFIG_RE.findall(text)))
    log.autotuner_ops = tuple(dict.fromkeys(AUTOTUNER_OP_RE.findall(text)))
    log.milestones = [name for name, pattern in MILESTONES if pattern.search(text)]
    log.durations = start_durations(text)
    log.comm = comm_facts(text)
    log.routing = ";".join(dict.fromkeys(ROUTING_RE.findall(text)))
    return log


def comm_facts(text: str) -> dict[str, str]:
    """What the log says about inter-GPU communication; each fact once (the first rank's line), NCCL's env too."""
    facts = {name: match.group(1).strip() for name, pattern in COMM_PATTERNS if (match := pattern.search(text))}
    nccl_env = dict(NCCL_ENV_RE.findall(text))
    if nccl_env:
        facts["nccl_env"] = ",".join(f"{k}={v}" for k, v in sorted(nccl_env.items()))
    return facts


_KEEP_RE = re.compile(
    r"Fp8 MoE backend|MoE config|configuration from|AutoTuner|autotune|Traceback|Error|error:|"
    r"Thread 0x|File \"|took|KV cache|Capturing|pruned|Timeout|timed out|flashinfer\.jit|top-p & top-k sampling|"
    r"nccl|allreduce|SymmMem|set by environment|moe_kernel=",
    re.IGNORECASE,  # FlashInfer spells it "[Autotuner]" in its per-tactic and "Skipped N" lines
)


def condense(text: str, head: int = 30, tail: int = 120, max_middle: int = 200) -> str:
    """Keep a log small enough to bring back: its head, its tail, and the informative lines between."""
    lines = text.splitlines()
    if len(lines) <= head + tail:
        return text
    middle = [line for line in lines[head:-tail] if _KEEP_RE.search(line)][-max_middle:]
    dropped = len(lines) - head - tail - len(middle)
    return "\n".join([*lines[:head], f"[... {dropped} lines dropped ...]", *middle, *lines[-tail:]]) + "\n"


# Seconds vLLM reports for the parts of a start (0.26 and 0.32 spellings); "sum" adds every occurrence
# (one line per compiled graph / range), "first" keeps the first.
START_DURATIONS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("weights_s", re.compile(r"(?:Loading weights|Initializing model) took ([\d.]+) ?s"), "first"),
    ("model_load_s", re.compile(r"Model loading took [\d.]+ GiB(?: memory)? and ([\d.]+) ?s"), "first"),
    ("dynamo_s", re.compile(r"Dynamo bytecode transform time: ([\d.]+) ?s"), "sum"),
    ("graph_compile_s", re.compile(r"Compiling a graph for .*? takes ([\d.]+) ?s"), "sum"),
    ("compiled_graph_load_s", re.compile(r"Directly load the compiled graph\(s\) for .*? took ([\d.]+) ?s"), "sum"),
    ("torch_compile_total_s", re.compile(r"torch\.compile (?:takes|took) ([\d.]+) ?s"), "sum"),
    ("cuda_graphs_s", re.compile(r"Graph capturing finished in ([\d.]+) ?sec"), "sum"),
    ("init_engine_s", re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) ?s"), "first"),
    # the server's own warm-up (option.warmup, entrypoint.lmi.warmup_gate), after the engine and before /health 200
    ("warmup_s", re.compile(r"warm-up: (?:done|failed \(exit status -?\d+\)) after ([\d.]+) s"), "first"),
)


# A vLLM log line's stamp (local time, whole seconds, no year), with the process prefix vLLM adds
# ("(APIServer pid=1)", "(EngineCore pid=2)", "(EngineCore_DP0 pid=2)"); our plugin's hook logs before vLLM sets it.
LOG_STAMP_RE = re.compile(
    r"^(?:\((?P<process>\w+) pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR) (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d) ", re.M
)


def process_gaps(text: str, launched_at: float) -> dict[str, float]:
    """The part of a start before vLLM's engine core logs, which vLLM does not time itself, split in two:
    `before_first_log_s`, from the server's launch to its first log line (interpreter, `import vllm`, the plugins),
    and `to_engine_core_s`, from that line to the engine core's first (the API server's config, its model-info
    subprocess, then starting EngineCore: spawn re-imports vLLM there, fork does not; 25 s against 3 s on 2026-12-03).
    Whole seconds, as vLLM stamps them; parts whose line is missing are left out."""
    year = time.localtime(launched_at).tm_year

    def seconds(match: re.Match[str]) -> float:
        return time.mktime(time.strptime(f"{year}-{match['stamp']}", "%Y-%m-%d %H:%M:%S"))

    first = LOG_STAMP_RE.search(text)
    if first is None:
        return {}
    gaps = {"before_first_log_s": round(max(0.0, seconds(first) - launched_at), 1)}
    core = next((m for m in LOG_STAMP_RE.finditer(text) if (m["process"] or "").startswith("EngineCore")), None)
    if core is not None:
        gaps["to_engine_core_s"] = round(seconds(core) - seconds(first), 1)
    return gaps


def start_durations(text: str) -> dict[str, float]:
    """The start's parts, in seconds, as vLLM logged them (absent parts are left out)."""
    found: dict[str, float] = {}
    for name, pattern, how in START_DURATIONS:
        values = [float(v) for v in pattern.findall(text)]
        if values:
            found[name] = round(sum(values) if how == "sum" else values[0], 2)
    return found
