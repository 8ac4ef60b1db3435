"""Benchmarks of the serving container: kernel-level timings and end-to-end engine runs (``benchmarks.e2e``)."""
