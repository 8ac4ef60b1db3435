"""Small helpers every layer may import: the refusal error (errors), secret redaction (redact), reading vLLM's argv
(argv), TCP ports: parsing one, a free loopback one (ports), finding a lone UTF-16 surrogate (text).

Standard library only, and nothing else of the project (pyproject.toml's contracts): the code inside vLLM's processes
(entrypoint.lmi, the warm-up) uses argv without the planning side, and the GPU host's scripts import ports without
the resolver's dependencies (benchmarks/serving/h200_middleware_check.py).
"""
