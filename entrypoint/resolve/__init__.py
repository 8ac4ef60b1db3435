"""What the resolver reasons with: GPUs, vLLM's capabilities, engine arguments, backend predicates and rules,
tuned-config names, and the Plan it produces (with its one renderer)."""
