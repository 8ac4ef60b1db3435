"""`make cache-layer` on the cpu image: bake in a container (the model read-only at /opt/ml/model), build the image
plus its layer, and a `serve` of that image seeds its caches from the layer (the key made in the bake container on
127.0.0.1 is the one `serve` computes on 0.0.0.0:8080)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx

from tests.conftest_paths import REPO
from tests.image.conftest import readable_copy, running
from tests.image.container import DOCKER, IMAGE, RUN_ARGS, Container, docker

CACHE_IMAGE = f"{IMAGE}-cache-test"


def test_a_baked_layer_is_seeded_by_serve_of_the_layered_image(
    tiny_model: Path, model_root: Path, tmp_path: Path
) -> None:
    model = readable_copy(tiny_model, model_root / "cache-layer", serving_properties=None)
    out = tmp_path / "bake"
    env = {**os.environ, "DOCKER": DOCKER, "CACHE_LAYER_RUN_ARGS": " ".join(RUN_ARGS)}
    argv = ["bash", str(REPO / "docker" / "cache_layer.sh"), IMAGE, str(model), str(out), CACHE_IMAGE]
    try:
        bake = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        assert bake.returncode == 0, (bake.stdout + bake.stderr)[-4000:]
        manifest = json.loads((out / "layer" / "manifest.json").read_text())
        assert manifest["key"]["gpu"] == "cpu" and manifest["bake_requests"] > 100
        assert manifest["compiled_args"][0] == "/opt/ml/model"
        container = Container(name="moe-image-test-cache-layer", model=model, image=CACHE_IMAGE)
        with running(container):
            container.wait_ready()
            logs = container.logs()
            # the folders the CPU engine's bake made (it runs eager: no Triton cache), copied from the image's layer
            seeded = re.search(r"compile cache: seeded (VLLM_CACHE_ROOT[A-Z_, ]*) from /opt/moe-serving/compile-cache "
                               r"\(made for this plan on cpu", logs)  # fmt: skip
            assert seeded, logs[-3000:]
            layered = _model_info_copied(logs)
            body = {"inputs": "Hi", "parameters": {"max_new_tokens": 2}}
            answer = httpx.post(container.url + "/invocations", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
        # the plain image has no layer and says so
        plain = Container(name="moe-image-test-no-layer", model=model)
        with running(plain):
            plain.wait_ready()
            assert "compile cache: no baked layer at /opt/moe-serving/compile-cache" in plain.logs()
            # vLLM's model-info entries baked at build (entrypoint/caches/model_info.py): all copied into the empty
            # cache; with the layer, none (the bake seeded them as serve does, so the layer's VLLM_CACHE_ROOT has them)
            copied = _model_info_copied(plain.logs())
            assert copied > 100 and layered == 0, (copied, layered)
        # a second bake into the same folder is refused before any container starts
        again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 2 and "exists; remove it or give another OUT_DIR" in again.stderr
    finally:
        docker("rmi", "-f", CACHE_IMAGE, check=False)


def _model_info_copied(logs: str) -> int:
    found = re.search(r"model info: (\d+) baked entries copied into /tmp/\.cache/vllm/modelinfos", logs)
    assert found, logs[-3000:]
    return int(found.group(1))
