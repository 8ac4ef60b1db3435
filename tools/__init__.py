"""Tools for developers and the H200 build host, never shipped in the image: the tuner (tune.py) and the vLLM
harness it times with (moe_harness.py, measure.py), the GPU check of the baked cache (aot_check.py), the cuda
image's lock (cuda_lock.py), and the local server the end-to-end tests and the serving benchmark share. Tools
import kernels and ops, never benchmarks or tests."""
