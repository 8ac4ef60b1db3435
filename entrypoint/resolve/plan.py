"""The resolver's output: one `vllm serve` command line, its environment, and the reasons."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from entrypoint.redact import redact_args, redact_env, scrub, secret_values


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str  # what `vllm serve` receives as its model (local dir, hub id; s3:// is fetched first)
    vllm_args: tuple[str, ...]  # argv after `vllm serve` (the model is the first element)
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for the vLLM process
    moe_backend: str = "auto"  # the value given to --moe-backend, "auto" when none is passed
    effective_moe_backend: str | None = None  # what vLLM will run ("cpu" on CPU, None for dense)
    moe_backend_source: str = "none"  # "option.moe_backend", "rule:<id>", "vllm-auto", "none"
    moe_kernel: str = "vllm"  # "vllm" (vLLM's own kernels) or "project" (kernels/ plugin)
    quantization: dict[str, Any] = Field(default_factory=dict)
    gpu: dict[str, Any] = Field(default_factory=dict)
    model_info: dict[str, Any] = Field(default_factory=dict)
    vllm_version: str = ""
    vllm_version_source: str = ""  # "installed" or "pinned-table"
    reasons: tuple[str, ...] = ()  # one line per automatic decision
    ignored_options: tuple[str, ...] = ()  # legacy LMI keys accepted but not passed to vLLM
    fetch_model: bool = False  # True when serve must download the model before exec

    def redacted(self) -> Plan:
        """This plan as it may be shown: secret flag and env values (--api-key, HF_TOKEN) are ***.

        Every renderer (resolve's table and JSON, the startup log, deploy's plan) shows this copy;
        only the argv and env handed to exec are the real ones.
        """
        secrets = secret_values(self.vllm_args, self.env)
        return self.model_copy(
            update={
                "vllm_args": tuple(redact_args(self.vllm_args, secrets)),
                "env": redact_env(self.env, secrets),
                "reasons": tuple(scrub(line, secrets) for line in self.reasons),
                "ignored_options": tuple(scrub(line, secrets) for line in self.ignored_options),
            }
        )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON of `resolve --json`: output, so secrets are redacted (see redacted())."""
        return self.redacted().model_dump(mode="json")  # mode="json" already turns the tuples into lists

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), indent=2, sort_keys=True)
