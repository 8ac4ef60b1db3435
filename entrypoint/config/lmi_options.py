"""The LMI vocabulary: environment aliases, LMI option names → vLLM engine arguments, legacy keys.

Tables only (data, no logic), so docs/configuration.md (generated from them: python -m
tools.docs_tables --write) and the tests read the same source. Facts:
docs/reference/lmi-sagemaker-contract.md (djl-serving, LMI v27 line).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LmiOption:
    """One LMI option with its own meaning here: the row of docs/configuration.md it becomes."""

    key: str  # option.KEY, normalised (lower case, `_`)
    becomes: str  # what it turns into, as the docs say it
    vllm: str | None = (
        None  # the vLLM engine argument it is renamed to; None: passed under its own name or handled here
    )
    env: tuple[str, ...] = ()  # SageMaker/TGI variables that set it when the option is unset; the first set wins
    notes: str = ""


# The LMI options that are more than a pass-through (any other option.X that is a vLLM argument goes to
# vLLM as --x, validated against its type). The alias and rename tables below are read from here.
LMI_OPTIONS: tuple[LmiOption, ...] = (
    LmiOption(
        "model_id",
        "the model (`vllm serve MODEL`)",
        vllm="model",
        env=("HF_MODEL_ID",),
        notes="local dir, hub id, or `s3://` prefix (downloaded first); default `/opt/ml/model`",
    ),
    LmiOption("revision", "`--revision`", env=("HF_REVISION",)),
    LmiOption(
        "quantize",
        "`--quantization`",
        vllm="quantization",
        env=("HF_MODEL_QUANTIZE",),
        notes="online quantisation of a BF16 checkpoint; refused on an already quantised one",
    ),
    LmiOption(
        "trust_remote_code", "`--trust-remote-code` / `--no-trust-remote-code`", env=("HF_MODEL_TRUST_REMOTE_CODE",)
    ),
    LmiOption(
        "tensor_parallel_degree",
        "`--tensor-parallel-size`",
        vllm="tensor_parallel_size",
        # TENSOR_PARALLEL_DEGREE is the explicit LMI name, SM_NUM_GPUS what SageMaker's TGI-style images set.
        env=("TENSOR_PARALLEL_DEGREE", "SM_NUM_GPUS"),
        notes="`max` or `-1` = all visible GPUs (NVML's list narrowed by `CUDA_VISIBLE_DEVICES` as CUDA reads it); "
        "more than visible is refused",
    ),
    LmiOption("pipeline_parallel_degree", "`--pipeline-parallel-size`", vllm="pipeline_parallel_size"),
    LmiOption(
        "max_rolling_batch_size",
        "`--max-num-seqs`",
        vllm="max_num_seqs",
        env=("MAX_BATCH_SIZE",),
        notes="also the concurrency bound the rules see",
    ),
    LmiOption(
        "max_rolling_batch_prefill_tokens",
        "`--max-num-batched-tokens`",
        vllm="max_num_batched_tokens",
        env=("MAX_BATCH_PREFILL_TOKENS",),
        notes="`8192`, `8k` (=8000), `8K` (=8192)",
    ),
    LmiOption(
        "max_model_len",
        "`--max-model-len`",
        env=("MAX_TOTAL_TOKENS",),
        notes="`32768`, `32k` (=32000), `32K` (=32768), `auto`",
    ),
    LmiOption("gpu_memory_utilization", "`--gpu-memory-utilization`", env=("CUDA_MEMORY_FRACTION",)),
    LmiOption(
        "enforce_eager",
        "`--enforce-eager` / `--no-enforce-eager`",
        notes="`ENABLE_CUDA_GRAPHS=false` sets it to true (and `=true` to false); on by default on the CPU engine",
    ),
    LmiOption(
        "dtype",
        "`--dtype`",
        env=("DTYPE",),
        notes="`fp16`/`bf16`/`fp32`/`auto` (and vLLM's own names) → `float16`/`bfloat16`/`float32`/`auto`",
    ),
    LmiOption("cpu_offload_gb_per_gpu", "`--cpu-offload-gb`", vllm="cpu_offload_gb"),
    LmiOption(
        "moe_backend",
        "`--moe-backend` (before vLLM 0.17: that era's environment variables)",
        notes="`auto` (the resolver decides) or a vLLM backend name, validated against the vLLM version, "
        "the checkpoint and the GPU",
    ),
    LmiOption(
        "moe_kernel",
        "–",
        notes="`auto` (our fused-MoE kernel at the token counts kernels/fused_moe_dispatch.json lists for the "
        "shape on an H200 with the Triton backend, vLLM's elsewhere), `project` (the same, refused where it "
        "cannot run) or `vllm` (vLLM's kernels only); sets MOE_SERVING_MOE_KERNEL for the engine plugin",
    ),
    LmiOption(
        "warmup",
        "–",
        notes="`auto` (on for a GPU engine, off for the CPU engine and with several API servers), `on` / `true` or "
        "`off` / `false`: the server sends the compile-cache bake's requests to itself before `/ping` answers 200, so "
        "kernels vLLM compiles on first use compile during the start, not under the first users' requests",
    ),
    LmiOption(
        "node_role",
        "`--headless` and the `--data-parallel-*` flags of one node",
        notes="`auto` (a LeaderWorkerSet's `LWS_*` variables when set, else one node), `single`, `head` (`leader`) "
        "or `worker` (`headless`): multi-node data parallel, docs/deployment.md",
    ),
    LmiOption(
        "tgi_compat",
        "–",
        notes="`false` (default) or `true`: answers to LMI/TGI bodies in TGI's shapes, as LMI's tgi_compat gives "
        "them: a unary answer inside a JSON array, details on unless the request says otherwise, tokens with TGI's "
        "`special` flag, streams as SSE (`text/event-stream`); docs/api.md",
    ),
    LmiOption(
        "output_formatter",
        "–",
        notes="`json` (LMI's default), `jsonlines` or `sse`: how a stream of an LMI/TGI body is framed "
        "(`sse` is the default under `tgi_compat`); LMI's chat and custom formatters are refused",
    ),
)

# SageMaker / TGI environment names → LMI option key, used only when the LMI key is unset.
# Order matters where two aliases feed one key: the first one set wins.
ENV_ALIASES: tuple[tuple[str, str], ...] = tuple((env, option.key) for option in LMI_OPTIONS for env in option.env)

# ENABLE_CUDA_GRAPHS=false means the opposite option (enforce_eager=true): handled apart.
CUDA_GRAPHS_ENV = "ENABLE_CUDA_GRAPHS"

# Server-level environment names that map to non-option keys.
ENV_SERVER_ALIASES: tuple[tuple[str, str], ...] = (("MAX_CONCURRENT_REQUESTS", "job_queue_size"),)

# LMI option name → vLLM engine argument it becomes (value transformed by entrypoint.resolve.engine_args).
LMI_TO_VLLM: dict[str, str] = {option.key: option.vllm for option in LMI_OPTIONS if option.vllm}
# Both names of one setting, each way (tensor_parallel_degree <-> tensor_parallel_size); every vLLM name has one
# LMI name (tests/entrypoint/test_settings.py).
OPTION_TWINS: dict[str, str] = {**LMI_TO_VLLM, **{vllm: lmi for lmi, vllm in LMI_TO_VLLM.items()}}

# LMI dtype spellings → vLLM --dtype values.
DTYPE_NAMES: dict[str, str] = {
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "auto": "auto",
}

# Options this container interprets itself (never passed through verbatim): typed fields of Settings, values in
# entrypoint.config.moe, .warmup, .node_role and .response_format (option.moe_kernel=project: ops.fused_moe_fp8 through
# entrypoint.moe_plugin).
PROJECT_OPTIONS: frozenset[str] = frozenset(
    {"moe_backend", "moe_kernel", "warmup", "node_role", "output_formatter", "tgi_compat"}
)

# Engine/frontend arguments the entrypoint owns: the bind address comes from SageMaker's contract,
# the middleware is what makes /invocations speak LMI.
RESERVED_ARGS: dict[str, str] = {
    "host": "the container binds 0.0.0.0 (serve --host to change it for local runs)",
    "port": "SageMaker fixes the port: set SAGEMAKER_BIND_TO_PORT instead",
    "middleware": "the LMI middleware is always installed by the entrypoint",
    "headless": "set option.node_role=worker: it adds --headless with the data-parallel flags a worker needs",
}

# Legacy LMI option keys that are not vLLM engine arguments: accepted (old serving.properties
# files keep working) and logged as ignored.
LEGACY_OPTIONS: frozenset[str] = frozenset(
    {
        "rolling_batch",
        "entrypoint",  # option.entryPoint: keys are lower-cased before lookup
        "task",
        "device_map",
        "load_on_devices",
        "max_idle_time",
        "batch_size",
        "max_batch_delay",
        "mpi_mode",
        "enable_streaming",
        "model_loading_timeout",
        "predict_timeout",
        "parallel_loading",
        "async_mode",
        "rolling_batch_strategy",
        "paged_attention",
        "low_cpu_mem_usage",
        "engine",
        "use_passive_workers",
        "record_acceptance_rate",
    }
)

# Keys without the `option.` prefix configure djl-serving itself; none has a vLLM meaning.
SERVER_KEYS: frozenset[str] = frozenset(
    {
        "engine",
        "job_queue_size",
        "batch_size",
        "max_batch_delay",
        "max_idle_time",
        "minworkers",
        "maxworkers",
        "gpu.minworkers",
        "gpu.maxworkers",
        "cpu.minworkers",
        "cpu.maxworkers",
        "log_model_metric",
        "load_on_devices",
        "required_memory_mb",
        "reserved_memory_mb",
        "gpu.required_memory_mb",
        "gpu.reserved_memory_mb",
        "translatorfactory",
        "translator",
    }
)

# engine= values LMI documents; Python is the vLLM path, MPI was lmi-dist/TensorRT-LLM.
ENGINE_VALUES: tuple[str, ...] = ("Python", "MPI")
