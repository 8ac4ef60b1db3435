"""The Triton fused-MoE tile search and our kernel's dispatch check, run on the serving GPU
(`python -m entrypoint tune`, `bake-cache`) and by the lab's `python -m tools.tune`."""
