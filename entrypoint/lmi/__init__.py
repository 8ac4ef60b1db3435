"""The LMI layer that runs inside vLLM's API server: request translation, the ASGI middleware, the exit status.

It imports nothing of the planning side (settings, model, resolver): vLLM loads it by module path.
"""
