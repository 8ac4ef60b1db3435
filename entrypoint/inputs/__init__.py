"""Gathering the resolver's inputs from the world and handing them to it: entrypoint.inputs.gather.build_plan.

The only I/O of planning (serving.properties and the environment, the model's config files on disk, S3 or the hub,
NVML, the installed vLLM, the tuned-config folder, the dispatch table). It sits above entrypoint.config_resolver, not
inside entrypoint.resolve, because resolve/ holds what the pure resolver imports: build_plan there would make resolve
import config_resolver and config_resolver import resolve, a cycle the layers contract (pyproject.toml) refuses.
"""
