"""The LMI vocabulary: environment aliases, LMI option names → vLLM engine arguments, legacy keys.

Tables only (data, no logic), so the README's serving.properties reference and the tests read the
same source. Facts: ../shared/reference/lmi-sagemaker-contract.md (djl-serving, LMI v27 line).
"""

from __future__ import annotations

# SageMaker / TGI environment names → LMI option key, used only when the LMI key is unset.
# Order matters where two aliases feed one key: the first one set wins (TENSOR_PARALLEL_DEGREE is
# the explicit LMI name, SM_NUM_GPUS is what SageMaker's TGI-style images set).
ENV_ALIASES: tuple[tuple[str, str], ...] = (
    ("HF_MODEL_ID", "model_id"),
    ("HF_REVISION", "revision"),
    ("HF_MODEL_QUANTIZE", "quantize"),
    ("HF_MODEL_TRUST_REMOTE_CODE", "trust_remote_code"),
    ("TENSOR_PARALLEL_DEGREE", "tensor_parallel_degree"),
    ("SM_NUM_GPUS", "tensor_parallel_degree"),
    ("MAX_BATCH_SIZE", "max_rolling_batch_size"),
    ("MAX_BATCH_PREFILL_TOKENS", "max_rolling_batch_prefill_tokens"),
    ("MAX_TOTAL_TOKENS", "max_model_len"),
    ("CUDA_MEMORY_FRACTION", "gpu_memory_utilization"),
    ("DTYPE", "dtype"),
)

# ENABLE_CUDA_GRAPHS=false means the opposite option (enforce_eager=true): handled apart.
CUDA_GRAPHS_ENV = "ENABLE_CUDA_GRAPHS"

# Server-level environment names that map to non-option keys.
ENV_SERVER_ALIASES: tuple[tuple[str, str], ...] = (("MAX_CONCURRENT_REQUESTS", "job_queue_size"),)

# LMI option name → vLLM engine argument it becomes (value transformed by entrypoint.resolve.engine_args).
LMI_TO_VLLM: dict[str, str] = {
    "model_id": "model",
    "tensor_parallel_degree": "tensor_parallel_size",
    "pipeline_parallel_degree": "pipeline_parallel_size",
    "max_rolling_batch_size": "max_num_seqs",
    "max_rolling_batch_prefill_tokens": "max_num_batched_tokens",
    "quantize": "quantization",
    "cpu_offload_gb_per_gpu": "cpu_offload_gb",
}

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

# Options this container interprets itself (never passed through verbatim): typed fields of Settings,
# values in entrypoint.config.moe (option.moe_kernel=project: kernels/ through a vLLM plugin, issue 7).
PROJECT_OPTIONS: frozenset[str] = frozenset({"moe_backend", "moe_kernel"})

# Engine/frontend arguments the entrypoint owns: the bind address comes from SageMaker's contract,
# the middleware is what makes /invocations speak LMI.
RESERVED_ARGS: dict[str, str] = {
    "host": "the container binds 0.0.0.0 (serve --host to change it for local runs)",
    "port": "SageMaker fixes the port: set SAGEMAKER_BIND_TO_PORT instead",
    "middleware": "the LMI middleware is always installed by the entrypoint",
}

# Legacy LMI option keys that are not vLLM engine arguments: accepted (old serving.properties
# files keep working) and logged as ignored.
LEGACY_OPTIONS: frozenset[str] = frozenset(
    {
        "rolling_batch",
        "entrypoint",  # option.entryPoint: keys are lower-cased before lookup
        "output_formatter",
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
        "tgi_compat",
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
