"""`python -m entrypoint resolve` end to end on realistic checkpoints' config files (a real subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from entrypoint.cli import main
from tests.conftest_paths import FIXTURE_MODELS

FIXTURES = FIXTURE_MODELS
SECRET_ENV = {
    "HF_TOKEN": "hf_SECRETtokenDoNotPrint123",
    "AWS_SECRET_ACCESS_KEY": "AWSsecretDoNotPrint/abc+xyz",
    "AWS_ACCESS_KEY_ID": "AKIADONOTPRINT0000",
}
JSON_KEYS = {"moe_backend", "effective_moe_backend", "quantization", "gpu", "vllm_args", "env", "reasons"}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("OPTION_", "HF_", "SM_", "AWS_", "TENSOR_PARALLEL", "SAGEMAKER_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)


_capture: pytest.CaptureFixture[str] | None = None


@pytest.fixture(autouse=True)
def _bind_capture(capsys):
    global _capture
    _capture = capsys


def run_resolve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (a subprocess costs ~1 s each); exit code, stdout, stderr as a subprocess would."""
    assert _capture is not None
    _capture.readouterr()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        code = main(["resolve", *args])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out, err = _capture.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_the_real_executable_exits_2_on_a_refused_configuration():
    env = {**os.environ, "OPTION_MOE_BACKEND": "deep_gemm"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "entrypoint",
            "resolve",
            "--model",
            str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"),
            "--gpu",
            "H200",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "OPTION_MOE_BACKEND (option.moe_backend)='deep_gemm'" in done.stderr
    assert all(secret not in done.stdout + done.stderr for secret in SECRET_ENV.values())


def resolve_json(model: str, *args: str, env: dict[str, str] | None = None) -> dict:
    done = run_resolve("--model", str(FIXTURES / model), "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


CASES = [
    pytest.param(
        "mixtral-8x7b-instruct-v0.1-fp8", "H200", "triton", "triton", id="Mixtral FP8 static on H200 goes to Triton"
    ),
    pytest.param(
        "nvidia-nemotron-3-nano-30b-a3b-fp8",
        "H200",
        "triton",
        "triton",
        id="Nemotron ModelOpt FP8 on H200 goes to Triton",
    ),
    pytest.param("qwen3-30b-a3b-fp8", "H200", "auto", "triton", id="Qwen3 FP8 block on H200 is vLLM's Triton"),
    pytest.param("deepseek-v3", "H200", "auto", "triton", id="DeepSeek-V3 on H200 is vLLM's Triton"),
    pytest.param(
        "qwen3-30b-a3b-fp8-dynamic", "H200", "auto", "cutlass", id="compressed-tensors dynamic on H200 is vLLM CUTLASS"
    ),
    pytest.param("gpt-oss-120b", "H200", "auto", "triton", id="gpt-oss MXFP4 on H200"),
    pytest.param("qwen3-30b-a3b", "H200", "auto", "triton", id="Qwen3 BF16 on H200"),
    pytest.param("meta-llama-3.1-8b-instruct-fp8", "H200", "auto", None, id="a dense FP8 Llama has no MoE backend"),
    pytest.param(
        "mixtral-8x7b-instruct-v0.1-fp8", "H100", "triton", "triton", id="Mixtral FP8 static on H100 goes to Triton"
    ),
    pytest.param("mixtral-8x7b-instruct-v0.1-fp8", "B200", "auto", "flashinfer_trtllm", id="Mixtral FP8 on B200 stays"),
    pytest.param("mixtral-8x7b-instruct-v0.1-fp8", "A100", "auto", "marlin", id="Mixtral FP8 on A100 is Marlin"),
    pytest.param("qwen3-30b-a3b", "cpu", "auto", "cpu", id="Qwen3 BF16 on the CPU engine"),
]


@pytest.mark.parametrize(("model", "gpu", "passed", "effective"), CASES)
def test_resolve_json_on_realistic_checkpoints(model, gpu, passed, effective):
    plan = resolve_json(model, "--gpu", gpu, "--vllm-version", "0.26.0")
    assert plan.keys() >= JSON_KEYS
    assert plan["moe_backend"] == passed
    assert plan["effective_moe_backend"] == effective
    assert plan["vllm_args"][0].endswith(model)
    assert plan["reasons"]


def test_num_gpus_and_tensor_parallel_max(tmp_path):
    plan = resolve_json(
        "mixtral-8x7b-instruct-v0.1-fp8",
        "--gpu",
        "H200",
        "--num-gpus",
        "8",
        env={"OPTION_TENSOR_PARALLEL_DEGREE": "max"},
    )
    args = plan["vllm_args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert plan["gpu"]["count"] == 8


def test_a_model_directory_serving_properties_overrides_the_backend(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8", model)
    (model / "serving.properties").write_text("engine=Python\noption.moe_backend=flashinfer_cutlass\n")
    done = run_resolve("--model", str(model), "--gpu", "H200", "--json", env={"OPTION_MOE_BACKEND": "triton"})
    plan = json.loads(done.stdout)
    assert plan["moe_backend"] == "flashinfer_cutlass"  # the file wins over OPTION_MOE_BACKEND


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OPTION_MOE_BACKEND": "deep_gemm"}, "OPTION_MOE_BACKEND (option.moe_backend)='deep_gemm'"),
        ({"OPTION_MOE_BACKEND": "flashinfer_trtllm"}, "SM100 family"),
        ({"OPTION_TENSOR_PARALLEL_DEGREE": "4", "OPTION_TENSOR_PARALLEL_SIZE": "2"}, "different values"),
        ({"OPTION_QUANTIZE": "fp8"}, "option.quantize"),
        ({"OPTION_OUTPUT_FORMATTER": "json_chat"}, "OPTION_OUTPUT_FORMATTER (option.output_formatter)='json_chat'"),
        (
            {"OPTION_TGI_COMPAT": "maybe"},
            "OPTION_TGI_COMPAT (option.tgi_compat)='maybe': not a boolean. Accepted: true",
        ),
    ],
    ids=[
        "deep_gemm on per-tensor",
        "trtllm on Hopper",
        "twin keys",
        "quantize on a quantised checkpoint",
        "an LMI chat formatter",
        "tgi_compat not a boolean",
    ],
)
def test_invalid_configuration_exits_2_with_the_message_on_stderr(env, message):
    done = run_resolve(
        "--model",
        str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"),
        "--gpu",
        "H200",
        "--num-gpus",
        "8",
        "--json",
        env=env,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr


def test_an_fp8_checkpoint_on_the_cpu_is_refused():
    done = run_resolve("--model", str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"), "--gpu", "cpu")
    assert done.returncode == 2
    assert "cannot run on the CPU engine" in done.stderr


@pytest.mark.parametrize(
    ("model", "code", "shown"),
    [
        (str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"), 0, "entrypoint.lmi.middleware.LMIMiddleware"),
        ("org/does-not-exist", 2, "option.model_id='org/does-not-exist'"),
        ("/no/such/dir", 2, "option.model_id='/no/such/dir': directory does not exist"),
    ],
    ids=["a good local model", "an unreachable hub id", "a missing directory"],
)
def test_secrets_never_appear_in_any_output(model, code, shown):
    for extra in ([], ["--json"]):
        done = run_resolve("--model", model, "--gpu", "H200", *extra)
        text = done.stdout + done.stderr
        # It ran the path the case is about (an empty output would hide no secret either).
        assert (done.returncode, shown in text) == (code, True), text
        for secret in SECRET_ENV.values():
            assert secret not in text


def test_the_human_output_is_a_table_and_reasons():
    done = run_resolve("--model", str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"), "--gpu", "H200")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # The row itself, not the word in a reason line (which used to satisfy `"moe_backend" in stdout`).
    assert any(line.startswith("moe backend   triton (source: rule:") for line in lines), done.stdout
    assert any(line.startswith("command       vllm serve ") for line in lines), done.stdout
    assert "reasons:" in lines


def test_environment_settings_beat_the_image_default_serving_properties():
    """The image's own serving.properties (moe_backend=auto, tensor_parallel_degree=max) is the lowest layer."""
    env = {
        "MOE_SERVING_DEFAULT_PROPERTIES": str(FIXTURES.parents[2] / "serving.properties"),
        "OPTION_MOE_BACKEND": "flashinfer_cutlass",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.5",
        "TENSOR_PARALLEL_DEGREE": "2",
    }
    plan = resolve_json("qwen3-30b-a3b-fp8", "--gpu", "H200", "--num-gpus", "8", "--vllm-version", "0.26.0", env=env)
    args = plan["vllm_args"]
    assert plan["moe_backend"] == "flashinfer_cutlass"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.5"
    assert args[args.index("--tensor-parallel-size") + 1] == "2"
    assert any(r.startswith("settings overridden:") and "env:TENSOR_PARALLEL_DEGREE" in r for r in plan["reasons"])


def test_a_lone_surrogate_in_serving_properties_exits_2_with_a_printable_message(tmp_path):
    props = tmp_path / "serving.properties"
    props.write_text("option.served_model_name=\\ud800\n", encoding="utf-8")
    done = run_resolve(
        "--model", str(FIXTURES / "qwen3-30b-a3b-fp8"), "--properties", str(props), "--gpu", "H200", "--json"
    )
    assert done.returncode == 2
    assert "option.served_model_name='\\ud800'" in done.stderr
    done.stderr.encode("utf-8")  # what a real stderr does with it


def test_a_backend_before_0_17_on_a_dense_model_is_a_config_error_not_a_traceback():
    """Regression: this ended in `KeyError: 'marlin'` (PRE_017_BACKEND_ENV[backend]) instead of exit code 2."""
    done = run_resolve(
        "--model",
        str(FIXTURES / "meta-llama-3.1-8b-instruct-fp8"),
        "--gpu",
        "H200",
        "--vllm-version",
        "0.16.0",
        env={"OPTION_MOE_BACKEND": "marlin"},
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "OPTION_MOE_BACKEND (option.moe_backend)='marlin'" in done.stderr
    assert "vLLM 0.16.0 has no --moe-backend" in done.stderr
    assert "Accepted: auto, triton, flashinfer_cutlass, flashinfer_trtllm" in done.stderr


def test_tgi_compat_reaches_the_servers_environment_with_its_reason():
    done = run_resolve("--model", str(FIXTURES / "mixtral-8x7b-instruct-v0.1-fp8"), "--gpu", "H200", "--json",
                       env={"OPTION_TGI_COMPAT": "true"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["env"]["MOE_LMI_TGI_COMPAT"] == "true" and plan["env"]["MOE_LMI_STREAM_FORMAT"] == "sse"
    assert "responses to LMI/TGI bodies: each answer inside a JSON array, details on by default; streams as SSE " \
           "(option.tgi_compat / option.output_formatter)" in plan["reasons"]  # fmt: skip
    assert "tgi_compat" not in " ".join(plan["vllm_args"])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["resolve", "--vllm-version", "banana"], "--vllm-version"),
        (["resolve", "--gpu", "H200", "--num-gpus", "0"], "--num-gpus"),
        (["serve", "--port", "99999"], "--port"),
        (["run-local", "--port", "0"], "--port"),
        (["tune", "--out", "/tmp/x", "--tune-budget-s", "nan"], "--tune-budget-s"),
        (["tune", "--out", "/tmp/x", "--tune-budget-s", "-5"], "--tune-budget-s"),
    ],
    ids=["a version that is not one", "no GPUs", "a port past 65535", "port 0", "a NaN budget", "a negative budget"],
)
def test_a_bad_command_line_value_exits_2_naming_the_argument_and_what_it_takes(argv, named) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert _capture is not None
    err = _capture.readouterr().err
    assert named in err and "accepted: " in err and "Traceback" not in err


def test_a_gpu_count_with_no_gpu_to_count_is_refused_not_ignored() -> None:
    """On a machine without GPUs, --num-gpus alone would have planned the CPU engine and dropped the count."""
    done = run_resolve("--model", str(FIXTURES / "qwen3-30b-a3b"), "--num-gpus", "8")
    assert done.returncode == 2 and "--num-gpus=8: no GPU detected here to count" in done.stderr
