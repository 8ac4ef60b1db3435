"""LMI-compatible entrypoint for vLLM.

The commands sit at the root (`__main__`, `cli`, `serve`, `run_local`, `bake_cache`) with the pure resolver
(`config_resolver`: inputs → Plan). The pipeline, in the order it runs: `config` (what the user set) and `model` (the
checkpoint) are read by `inputs` (the only I/O of planning), which calls the resolver with what `resolve` reasons with
(GPUs, vLLM's capabilities, rules, the Plan); `serve` seeds the `caches` and becomes vLLM, inside which `lmi` (the
middleware), `warmup` (the server's own first requests) and `moe_plugin` (our fused-MoE kernel) run. `utils` holds
the standard-library helpers all of them share. pyproject.toml's import-linter contracts keep these layers.
"""
