"""Frozen description of a model checkpoint: what the resolver needs to know, nothing more.

`entrypoint.model.describe.describe_model` builds a `ModelDescription` from `config.json` (and
`hf_quant_config.json`) once; everything downstream reads these normalised fields instead of the
raw, family-specific keys.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class QuantFamily(StrEnum):
    """How the checkpoint declares its quantisation (the producer / format)."""

    UNQUANTIZED = "unquantized"
    FP8 = "fp8"  # native `quant_method: fp8`
    COMPRESSED_TENSORS = "compressed-tensors"
    MODELOPT = "modelopt"
    MXFP4 = "mxfp4"
    GPTQ = "gptq"
    AWQ = "awq"
    BITSANDBYTES = "bitsandbytes"
    ONLINE = "online"  # BF16/FP16 checkpoint quantised at load through option.quantize
    OTHER = "other"


class WeightDtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"  # e4m3
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    INT8 = "int8"
    INT4 = "int4"
    OTHER = "other"


class Granularity(StrEnum):
    """Scale granularity. Weights: tensor/channel/block/group. Activations: tensor/token/group."""

    NONE = "none"  # no scale (unquantised, or weight-only quantisation for activations)
    TENSOR = "tensor"
    CHANNEL = "channel"
    TOKEN = "token"
    BLOCK = "block"
    GROUP = "group"


class ActivationScheme(StrEnum):
    NONE = "none"  # activations stay in 16 bit (weight-only quantisation, or unquantised)
    STATIC = "static"  # scales calibrated and stored in the checkpoint
    DYNAMIC = "dynamic"  # scales computed at run time


class Quantization(BaseModel):
    """The quantisation scheme of the checkpoint's weights and activations."""

    model_config = ConfigDict(frozen=True)

    family: QuantFamily = QuantFamily.UNQUANTIZED
    # vLLM's `--quantization` name for this scheme when vLLM reads it from the checkpoint
    # ("fp8", "compressed-tensors", "modelopt", "modelopt_fp4", "mxfp4", "gptq", "awq", ...),
    # None for an unquantised checkpoint.
    method: str | None = None
    weight_dtype: WeightDtype = WeightDtype.BF16
    weight_granularity: Granularity = Granularity.NONE
    block_shape: tuple[int, int] | None = None  # (n, k) of block-quantised weights
    # Elements per scale of group-quantised weights (GPTQ/AWQ 128, NVFP4 16, MXFP4 32); None otherwise.
    group_size: int | None = None
    activation_dtype: WeightDtype | None = None  # None: activations unquantised
    activation_scheme: ActivationScheme = ActivationScheme.NONE
    activation_granularity: Granularity = Granularity.NONE
    # Where the scheme was read: "config.json", "hf_quant_config.json", "option.quantize", "none".
    source: str = "none"

    @property
    def is_fp8(self) -> bool:
        return self.weight_dtype == WeightDtype.FP8

    @property
    def is_fp8_per_tensor_static(self) -> bool:
        """FP8 per-tensor weights with static per-tensor activation scales (the Triton rule)."""
        return (
            self.is_fp8
            and self.weight_granularity == Granularity.TENSOR
            and self.activation_dtype == WeightDtype.FP8
            and self.activation_scheme == ActivationScheme.STATIC
            and self.activation_granularity == Granularity.TENSOR
        )

    def summary(self) -> str:
        """One human line, e.g. 'fp8: fp8 tensor weights, fp8 static tensor activations' (the method named where it
        differs from the family: 'modelopt (method modelopt_fp4): ...')."""
        if self.family == QuantFamily.UNQUANTIZED:
            return f"unquantised ({self.weight_dtype.value})"
        weights = f"{self.weight_dtype.value} {self.weight_granularity.value} weights"
        if self.block_shape:
            weights += f" {self.block_shape[0]}x{self.block_shape[1]}"
        if self.group_size:
            weights += f" g{self.group_size}"
        if self.activation_dtype is None:
            acts = "16-bit activations"
        else:
            acts = (
                f"{self.activation_dtype.value} {self.activation_scheme.value} "
                f"{self.activation_granularity.value} activations"
            )
        family = (
            self.family.value
            if self.method in (None, self.family.value)
            else f"{self.family.value} (method {self.method})"
        )
        return f"{family}: {weights}, {acts}"


class MoEShape(BaseModel):
    """Mixture-of-experts shape, aliases resolved (num_local_experts / num_experts / n_routed_experts)."""

    model_config = ConfigDict(frozen=True)

    num_experts: int  # routed experts per MoE layer
    top_k: int  # experts per token (num_experts_per_tok)
    hidden_size: int
    expert_intermediate_size: int  # width of one expert's FFN (moe_intermediate_size / intermediate_size)
    num_moe_layers: int | None = None
    num_shared_experts: int = 0
    gated: bool = True  # gate and up projections (SiLU·up); False for Nemotron-H's squared ReLU (up and down only)


class ModelDescription(BaseModel):
    """Normalised, frozen view of a checkpoint's config files."""

    model_config = ConfigDict(frozen=True)

    source: str  # local directory, hub id or s3:// prefix the config was read from
    model_type: str | None = None  # config.json model_type (top level)
    architectures: tuple[str, ...] = ()
    torch_dtype: str | None = None  # as declared: "bfloat16", "float16", ...
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    max_position_embeddings: int | None = None
    moe: MoEShape | None = None  # None: dense model
    quantization: Quantization = Quantization()

    @property
    def is_moe(self) -> bool:
        return self.moe is not None
