"""`docker run IMAGE` with nothing mounted, and configurations the container refuses before loading anything."""

from __future__ import annotations

import subprocess
import time

import httpx

from tests.image.conftest import running
from tests.image.container import DOCKER, IMAGE, RUN_ARGS, Container, docker, free_port

SECRET = "hf_refusaltestSECRETvalue0123456789"


def test_with_nothing_mounted_the_cpu_image_serves_its_built_in_tiny_model() -> None:
    flavour = docker("inspect", "-f", '{{index .Config.Labels "com.moe-serving.flavour"}}', IMAGE).stdout.strip()
    container = Container(name="moe-image-test-builtin", command=())  # the image's own CMD: serve
    with running(container):
        ready_s = container.wait_ready()
        print(f"no model mounted ({flavour}): first /ping 200 after {ready_s:.1f} s")
        logs = container.logs()
        assert "/opt/ml/model holds no config.json" in logs and "/opt/moe-serving/tiny-moe" in logs, logs[-3000:]
        answer = httpx.post(
            container.url + "/invocations", json={"inputs": "Hello", "parameters": {"max_new_tokens": 4}}, timeout=60
        )
        assert answer.status_code == 200 and isinstance(answer.json()["generated_text"], str), answer.text
        began = time.monotonic()
        docker("stop", "-t", "30", container.name, timeout=60)
        print(f"docker stop, no open request: {time.monotonic() - began:.1f} s")
        assert container.exit_code() == 0


def run_to_exit(env: dict[str, str], timeout: float = 60) -> tuple[int, str, float]:
    """`docker run` in the foreground (as SageMaker would start it) until it exits: code, output, seconds."""
    argv = [DOCKER, "run", "--rm", "--network", "host", *RUN_ARGS]
    for key, value in {"SAGEMAKER_BIND_TO_PORT": str(free_port()), **env}.items():
        argv += ["-e", f"{key}={value}"]
    began = time.monotonic()
    done = subprocess.run([*argv, IMAGE, "serve"], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def test_a_misspelled_moe_backend_exits_2_in_seconds_naming_the_key_and_loading_nothing() -> None:
    code, logs, seconds = run_to_exit({"OPTION_MOE_BACKEND": "tritonn", "HF_TOKEN": SECRET})
    print(f"refused configuration: exit {code} after {seconds:.1f} s")
    assert code == 2, logs
    assert "OPTION_MOE_BACKEND" in logs and "'tritonn'" in logs and "Accepted:" in logs, logs
    assert seconds < 30, f"took {seconds:.1f} s to refuse"
    assert "Traceback" not in logs
    # Nothing was loaded: vLLM never started (its own log lines carry these words).
    for loaded in ("Loading weights", "EngineCore", "vLLM API server", "Starting vLLM"):
        assert loaded not in logs, f"{loaded!r} in the log of a refused configuration"
    assert SECRET not in logs


def test_a_bad_bind_port_exits_2_naming_the_variable() -> None:
    code, logs, _ = run_to_exit({"SAGEMAKER_BIND_TO_PORT": "http"})
    assert code == 2 and "SAGEMAKER_BIND_TO_PORT='http'" in logs, logs


def test_the_images_vllm_finds_the_engine_plugin() -> None:
    # vLLM loads general plugins from installed package metadata only; on the H200 device a checkout on PYTHONPATH
    # had none and the plan's MOE_SERVING_MOE_KERNEL=project reached an engine that never loaded the plugin
    probe = (
        "from importlib.metadata import entry_points; "
        "print(sorted(f'{e.name} = {e.value}' for e in entry_points(group='vllm.general_plugins')))"
    )
    done = docker("run", "--rm", "--network", "host", "--entrypoint", "python3", IMAGE, "-c", probe, timeout=120)
    assert "moe_serving_fused_moe = entrypoint.moe_plugin:register" in done.stdout, done.stdout + done.stderr
