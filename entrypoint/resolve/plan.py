"""The resolver's output: one `vllm serve` command line, its environment, and the reasons.

Typed all the way down, so `resolve --json`, the startup log and `sagemaker_deploy plan` read the
same fields; `to_json()` keeps the keys `resolve --json` has always had.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from entrypoint.config.moe import MoeBackend, MoeKernel
from entrypoint.model.types import ModelDescription, MoEShape, Quantization
from entrypoint.resolve.gpu_types import GpuSummary
from entrypoint.utils.redact import redact_args, redact_env, redact_url_userinfo, scrub, secret_values


class PlanQuantization(Quantization):
    """The checkpoint's quantisation scheme; its JSON carries the one-line summary() as "summary"."""

    @model_serializer(mode="wrap")
    def _with_summary(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {**handler(self), "summary": self.summary()}

    @classmethod
    def of(cls, quantization: Quantization) -> PlanQuantization:
        return cls(**quantization.model_dump())


class PlanModel(BaseModel):
    """What the plan says about the checkpoint (`model_info` in `resolve --json`)."""

    model_config = ConfigDict(frozen=True)

    source: str = ""
    architectures: tuple[str, ...] = ()
    moe: MoEShape | None = None  # None: dense model

    @classmethod
    def of(cls, model: ModelDescription) -> PlanModel:
        return cls(source=model.source, architectures=model.architectures, moe=model.moe)


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str  # what `vllm serve` receives as its model (local dir, hub id; s3:// is fetched first)
    vllm_args: tuple[str, ...]  # argv after `vllm serve` (the model is the first element)
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for the vLLM process
    moe_backend: MoeBackend = MoeBackend.AUTO  # the value given to --moe-backend, auto when none is passed
    effective_moe_backend: str | None = None  # what vLLM will run ("cpu" on CPU, None for dense)
    moe_backend_source: str = "none"  # "option.moe_backend", "rule:<id>", "vllm-auto", "none"
    moe_kernel: MoeKernel = MoeKernel.VLLM  # vLLM's own kernels, or ours by token count (entrypoint.moe_plugin)
    quantization: PlanQuantization = PlanQuantization()
    gpu: GpuSummary = GpuSummary()
    model_info: PlanModel = PlanModel()
    vllm_version: str = ""
    vllm_version_source: str = ""  # "installed:<path>", "snapshot:<file>", "era-table:..."
    reasons: tuple[str, ...] = ()  # one line per automatic decision
    ignored_options: tuple[str, ...] = ()  # legacy LMI keys accepted but not passed to vLLM
    fetch_model: bool = False  # True when serve must download the model before exec
    node_role: str = "single"  # single, head or worker (entrypoint.resolve.multinode); a worker runs --headless

    def redacted(self) -> Plan:
        """This plan as it may be shown: secret flag and env values (--api-key, HF_TOKEN) are ***, and so is the
        password of any `scheme://user:password@` URL in an argument, env value or reason.

        Every view of a plan (entrypoint.resolve.render, `resolve --json`) shows this copy; only the
        argv and env handed to exec are the real ones.
        """
        secrets = secret_values(self.vllm_args, self.env)
        return self.model_copy(
            update={
                "vllm_args": tuple(redact_args(self.vllm_args, secrets)),
                "env": redact_env(self.env, secrets),
                # reasons may echo an option's value, a URL with a password among them
                "reasons": tuple(scrub(redact_url_userinfo(line), secrets) for line in self.reasons),
                "ignored_options": tuple(scrub(redact_url_userinfo(line), secrets) for line in self.ignored_options),
            }
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON of `resolve --json`: output, so secrets are redacted (see redacted())."""
        return self.redacted().model_dump(mode="json")  # mode="json" already turns the tuples into lists

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), indent=2, sort_keys=True)
