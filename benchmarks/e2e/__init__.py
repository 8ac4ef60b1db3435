"""End-to-end engine benchmark: vLLM's engine per (model, MoE backend), decode/output tok/s, TTFT, TPOT.

Data flow: ``cli`` parses the selection → ``runner`` starts one ``worker`` subprocess per (model, backend)
with its own timeout and cache dirs → the worker writes JSON lines (versions, engine start, one sample per
repetition) → ``logparse`` reads what vLLM logged (backend chosen, default-config warning, start milestones)
→ ``stats`` reduces samples to best/median → ``report`` writes the CSV, the markdown table and the plot.
Everything but ``worker`` is plain Python (no vLLM, no torch) so it is unit-tested on CPU.
``engine_start`` (run on its own) times the engine's start with an empty, the image's baked and a warm Triton cache.
"""
