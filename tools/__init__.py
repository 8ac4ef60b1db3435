"""Tools for developers and the H200 build host, never shipped in the image: the tuner, the harness, the sweep,
the generated-docs command and the local server harness the tests and benchmarks share."""
