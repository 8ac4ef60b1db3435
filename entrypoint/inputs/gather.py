"""The one pipeline from user inputs to a Plan: settings → model → GPUs → vLLM capabilities → resolve.

This is the only place that does I/O for planning (files, NVML, S3/hub config reads); the resolver
(entrypoint.config_resolver) itself stays pure. `resolve`, `serve`, `bake-cache` and `sagemaker_deploy plan` all call
`build_plan`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from entrypoint.config.settings import load_settings
from entrypoint.config_resolver import resolve
from entrypoint.inputs.host import probe_cpu_host
from entrypoint.model.describe import describe_model
from entrypoint.model.sources import read_model_configs
from entrypoint.moe_plugin import entry_point_installed
from entrypoint.resolve.gpu import gpu_inventory
from entrypoint.resolve.layer_files import layer_dispatch_table, layer_tuned_dir
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tuned_configs import ORIGIN_LAYER, TunedConfigIndex, default_config_dir
from entrypoint.resolve.vllm_caps import detect_capabilities
from entrypoint.utils.errors import ConfigError
from kernels.dispatch import TABLE_ENV as DISPATCH_TABLE_ENV
from kernels.dispatch import DispatchTable, DispatchTableError, table_path


def load_dispatch_table(environ: Mapping[str, str]) -> DispatchTable:
    """The table the plan and the plugin use: the user's file when named, else the compile-cache layer's (measured on
    this GPU by `make cache-layer`), else the shipped one."""
    layer = None if environ.get(DISPATCH_TABLE_ENV) else layer_dispatch_table(environ)
    path = layer or table_path(environ)
    try:
        return DispatchTable.load(path)
    except DispatchTableError as exc:
        if environ.get(DISPATCH_TABLE_ENV):
            key = DISPATCH_TABLE_ENV
        else:
            key = "the compile-cache layer's dispatch table" if layer else "kernels/fused_moe_dispatch.json (shipped)"
        raise ConfigError(key, str(path), str(exc), "a file written by benchmarks.kernels.dispatch_table") from None


def tuned_config_indexes(environ: Mapping[str, str]) -> tuple[TunedConfigIndex, ...]:
    """The folders of tuned tile files in the resolver's order: the compile-cache layer's (tuned on this GPU), then
    the image's; those that hold no file are left out."""
    layer = layer_tuned_dir(environ)
    found = (
        TunedConfigIndex.scan(layer, origin=ORIGIN_LAYER) if layer is not None else None,
        TunedConfigIndex.scan(default_config_dir(environ)),
    )
    return tuple(index for index in found if index is not None)


def hub_environ(options: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the model's config reads see: option.hf_token, when set, as HF_TOKEN (the explicit option
    beats the environment, as it does for vLLM's download: engine_args.SECRET_ENV)."""
    token = options.get("hf_token")
    return {**environ, "HF_TOKEN": token} if token else dict(environ)


def build_plan(
    *,
    model: str | None = None,
    properties: Path | None = None,
    gpu: str | None = None,
    num_gpus: int | None = None,
    vllm_version: str | None = None,
    environ: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
    check_plugin_installed: bool = True,
) -> Plan:
    """Resolve the plan for these inputs. Raises entrypoint.utils.errors.ConfigError when refused.

    check_plugin_installed=False: the plan is for another installation (sagemaker_deploy plans for the image, which
    installs the package), so whether this Python has the engine plugin's entry point does not matter."""
    env = dict(os.environ if environ is None else environ)
    settings, settings_reasons = load_settings(
        model=model, properties=Path(properties) if properties else None, environ=env, host=host, port=port
    )
    config, hf_quant_config, source = read_model_configs(
        settings.model, revision=settings.options.get("revision"), environ=hub_environ(settings.options, env)
    )
    # option.quantize or its vLLM twin: both become --quantization, so both describe what vLLM will serve
    quantize_key = "quantize" if "quantize" in settings.options else "quantization"
    description = describe_model(
        config,
        hf_quant_config,
        source=source,
        quantize=settings.options.get(quantize_key),
        quantize_label=settings.option_label(quantize_key),
    )
    gpus = gpu_inventory(gpu, num_gpus)
    caps = detect_capabilities(vllm_version)
    gpu = gpus.summary()
    context = (
        *settings_reasons,
        f"gpu: {gpu.count} x {gpu.name} (sm {gpu.sm}, {gpus.source})",
        f"model: {source}: {'MoE' if description.is_moe else 'dense'}, {description.quantization.summary()}",
        f"vllm: {caps.version} ({caps.source})",
    )
    return resolve(
        settings,
        description,
        gpus,
        caps,
        environ=env,
        tuned=tuned_config_indexes(env),
        dispatch=load_dispatch_table(env),
        context_reasons=context,
        # the plugin's entry point matters only where this Python runs the planned vLLM
        plugin_installed=(
            entry_point_installed() if check_plugin_installed and caps.source.startswith("installed:") else None
        ),
        # the CPU engine's workers bind CPUs and share /dev/shm of the machine that runs them: this one
        host=probe_cpu_host() if gpus.is_cpu else None,
    )
