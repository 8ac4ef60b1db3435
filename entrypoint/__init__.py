"""LMI-compatible entrypoint for vLLM: settings, model inspection, GPU detection, the resolver, serving."""
