"""Settings precedence, aliases and serving.properties parsing, as LMI reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.config.settings import fallback_model, load_settings, read_properties
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import REPO
from tests.entrypoint.config.settings_cases import plan_with, props_file

PRECEDENCE_CASES = [
    pytest.param(
        "option.max_model_len=4096\n",
        {"OPTION_MAX_MODEL_LEN": "8192"},
        "max_model_len",
        "4096",
        id="the file wins over OPTION_ env for the same key",
    ),
    pytest.param(
        "",
        {"OPTION_MAX_MODEL_LEN": "8192"},
        "max_model_len",
        "8192",
        id="OPTION_FOO_BAR becomes option.foo_bar",
    ),
    pytest.param(
        "",
        {"OPTION_TENSOR_PARALLEL_DEGREE": "2", "TENSOR_PARALLEL_DEGREE": "4"},
        "tensor_parallel_degree",
        "2",
        id="OPTION_ env wins over the SageMaker alias",
    ),
    pytest.param(
        "",
        {"TENSOR_PARALLEL_DEGREE": "4", "SM_NUM_GPUS": "8"},
        "tensor_parallel_degree",
        "4",
        id="TENSOR_PARALLEL_DEGREE wins over SM_NUM_GPUS",
    ),
    pytest.param(
        "", {"SM_NUM_GPUS": "8"}, "tensor_parallel_degree", "8", id="SM_NUM_GPUS feeds tensor_parallel_degree"
    ),
    pytest.param("", {"HF_MODEL_ID": "org/model"}, "model_id", "org/model", id="HF_MODEL_ID feeds model_id"),
    pytest.param("", {"HF_REVISION": "abc"}, "revision", "abc", id="HF_REVISION feeds revision"),
    pytest.param("", {"HF_MODEL_QUANTIZE": "fp8"}, "quantize", "fp8", id="HF_MODEL_QUANTIZE feeds quantize"),
    pytest.param(
        "",
        {"HF_MODEL_TRUST_REMOTE_CODE": "true"},
        "trust_remote_code",
        "true",
        id="HF_MODEL_TRUST_REMOTE_CODE feeds trust_remote_code",
    ),
    pytest.param(
        "", {"MAX_BATCH_SIZE": "32"}, "max_rolling_batch_size", "32", id="MAX_BATCH_SIZE feeds max_rolling_batch_size"
    ),
    pytest.param(
        "",
        {"MAX_BATCH_PREFILL_TOKENS": "8192"},
        "max_rolling_batch_prefill_tokens",
        "8192",
        id="MAX_BATCH_PREFILL_TOKENS feeds max_rolling_batch_prefill_tokens",
    ),
    pytest.param(
        "",
        {"CUDA_MEMORY_FRACTION": "0.8"},
        "gpu_memory_utilization",
        "0.8",
        id="CUDA_MEMORY_FRACTION feeds gpu_memory_utilization",
    ),
    pytest.param(
        "", {"ENABLE_CUDA_GRAPHS": "false"}, "enforce_eager", "true", id="ENABLE_CUDA_GRAPHS=false means eager"
    ),
    pytest.param(
        "", {"ENABLE_CUDA_GRAPHS": "TRUE"}, "enforce_eager", "false", id="ENABLE_CUDA_GRAPHS=true means graphs"
    ),
    pytest.param("", {"OPTION_MAX_MODEL_LEN": ""}, "max_model_len", None, id="empty env values are ignored"),
    pytest.param(
        "option.Max-Model-Len = 1024\n",
        {},
        "max_model_len",
        "1024",
        id="keys are case and dash insensitive",
    ),
    pytest.param(
        "option.max_model_len : 2048\n",
        {},
        "max_model_len",
        "2048",
        id="a colon separator is a Java properties separator",
    ),
    pytest.param(
        'option.speculative_config={"method": \\\n  "ngram"}\n',
        {},
        "speculative_config",
        '{"method": "ngram"}',
        id="continuation lines join and JSON stays intact",
    ),
    pytest.param(
        "option.served_model_name=a\\u00e9b\n",
        {},
        "served_model_name",
        "aéb",
        id="unicode escapes are decoded",
    ),
    pytest.param(
        "# comment\n! also a comment\noption.dtype=bf16\n",
        {},
        "dtype",
        "bf16",
        id="comments are skipped",
    ),
]


@pytest.mark.parametrize(("properties", "environ", "key", "expected"), PRECEDENCE_CASES)
def test_precedence_and_aliases(tmp_path, properties, environ, key, expected):
    path = props_file(tmp_path, properties)
    settings, _ = load_settings(properties=path, environ=environ)
    assert settings.options.get(key) == expected


def test_the_model_directory_properties_file_is_read(tmp_path):
    props_file(tmp_path, "option.max_model_len=777\nengine=Python\n")
    settings, reasons = load_settings(model=str(tmp_path), environ={})
    assert settings.options["max_model_len"] == "777"
    assert settings.server == {"engine": "Python"}
    assert "model directory" in reasons[0]


def test_an_explicit_properties_path_beats_the_model_directory(tmp_path):
    props_file(tmp_path, "option.max_model_len=1\n")
    explicit = props_file(tmp_path, "option.max_model_len=2\n", name="other.properties")
    settings, _ = load_settings(model=str(tmp_path), properties=explicit, environ={})
    assert settings.options["max_model_len"] == "2"


def test_the_image_default_is_read_when_the_model_has_none(tmp_path):
    default = props_file(tmp_path, "option.moe_backend=auto\n", name="default.properties")
    settings, reasons = load_settings(
        model=str(tmp_path / "model"), environ={"MOE_SERVING_DEFAULT_PROPERTIES": str(default)}
    )
    assert settings.moe_backend == "auto"
    assert "image default" in reasons[0]


def test_cli_model_wins_over_everything(tmp_path):
    settings, _ = load_settings(model="cli/model", environ={"HF_MODEL_ID": "env/model", "OPTION_MODEL_ID": "x/y"})
    assert settings.model == "cli/model"


def test_model_defaults_to_opt_ml_model():
    settings, _ = load_settings(environ={})
    assert settings.model == "/opt/ml/model"


def test_sagemaker_bind_to_port_sets_the_port():
    settings, _ = load_settings(environ={"SAGEMAKER_BIND_TO_PORT": "9090"})
    assert settings.port == 9090


@pytest.mark.parametrize("bad", ["abc", "0", "70000"])
def test_a_bad_bind_port_names_the_variable(bad):
    with pytest.raises(ConfigError, match=r"SAGEMAKER_BIND_TO_PORT='?" + bad):
        load_settings(environ={"SAGEMAKER_BIND_TO_PORT": bad})


def test_a_bad_enable_cuda_graphs_value_is_refused():
    with pytest.raises(ConfigError, match="ENABLE_CUDA_GRAPHS='maybe'.*Accepted: true, false"):
        load_settings(environ={"ENABLE_CUDA_GRAPHS": "maybe"})


def test_a_missing_properties_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--properties.*file not found"):
        read_properties(tmp_path / "absent.properties")


# --- Layer order: image default file < SageMaker/TGI aliases < OPTION_* < the user's file < --model ---------


def _image_default(tmp_path: Path, text: str) -> dict[str, str]:
    return {"MOE_SERVING_DEFAULT_PROPERTIES": str(props_file(tmp_path, text, name="image-default.properties"))}


LAYER_CASES = [
    pytest.param({"OPTION_MOE_BACKEND": "triton"}, "moe_backend", "triton", id="OPTION_ env beats the image default"),
    pytest.param(
        {"TENSOR_PARALLEL_DEGREE": "2"}, "tensor_parallel_degree", "2", id="a SageMaker alias beats the image default"
    ),
    pytest.param(
        {"CUDA_MEMORY_FRACTION": "0.5"},
        "gpu_memory_utilization",
        "0.5",
        id="CUDA_MEMORY_FRACTION beats the image default",
    ),
    pytest.param(
        {"ENABLE_CUDA_GRAPHS": "false"}, "enforce_eager", "true", id="ENABLE_CUDA_GRAPHS beats the image default"
    ),
    pytest.param(
        {"TENSOR_PARALLEL_DEGREE": "2", "OPTION_TENSOR_PARALLEL_DEGREE": "4"},
        "tensor_parallel_degree",
        "4",
        id="OPTION_ still beats the alias above the image default",
    ),
    pytest.param({}, "max_rolling_batch_size", "64", id="the image default fills keys nobody else sets"),
]


@pytest.mark.parametrize(("environ", "key", "expected"), LAYER_CASES)
def test_the_image_default_file_is_the_lowest_layer(tmp_path, environ, key, expected):
    env = _image_default(
        tmp_path,
        "option.moe_backend=auto\noption.tensor_parallel_degree=max\noption.gpu_memory_utilization=0.9\n"
        "option.enforce_eager=false\noption.max_rolling_batch_size=64\n",
    )
    settings, _ = load_settings(model=str(tmp_path / "model"), environ={**env, **environ})
    # option.moe_backend is typed (Settings.moe_backend); the others stay text for the engine arguments
    value = settings.moe_backend if key == "moe_backend" else settings.options.get(key)
    assert value == expected


def test_an_environment_server_alias_beats_the_image_default_but_not_the_users_file(tmp_path):
    env = {**_image_default(tmp_path, "job_queue_size=10\n"), "MAX_CONCURRENT_REQUESTS": "99"}
    settings, _ = load_settings(model=str(tmp_path / "model"), environ=env)
    assert settings.server["job_queue_size"] == "99"
    user = props_file(tmp_path, "job_queue_size=7\n")
    settings, _ = load_settings(model=str(tmp_path / "model"), properties=user, environ=env)
    assert settings.server["job_queue_size"] == "7"


def test_the_users_file_still_beats_the_environment_when_an_image_default_exists(tmp_path):
    env = {**_image_default(tmp_path, "option.moe_backend=auto\n"), "OPTION_MOE_BACKEND": "triton"}
    model = tmp_path / "model"
    model.mkdir()
    props_file(model, "option.moe_backend=flashinfer_cutlass\n")
    settings, reasons = load_settings(model=str(model), environ=env)
    assert settings.moe_backend == "flashinfer_cutlass"
    assert settings.sources["moe_backend"] == f"file:{model / 'serving.properties'}"
    assert "image-default" not in "\n".join(reasons)  # exactly one file is read


def test_one_reason_line_names_where_each_overridden_key_came_from_without_values(tmp_path):
    env = {**_image_default(tmp_path, "option.served_model_name=m\n"), "OPTION_SERVED_MODEL_NAME": "m-SECRETISH"}
    _, reasons = load_settings(model=str(tmp_path / "model"), environ=env)
    (line,) = [reason for reason in reasons if reason.startswith("settings overridden:")]
    assert "option.served_model_name from env:OPTION_SERVED_MODEL_NAME (over file:" in line
    assert "SECRETISH" not in line
    assert "image default" in reasons[0]


def test_env_option_beats_the_repositorys_image_default_file() -> None:
    # The image default sets moe_backend=auto and tensor_parallel_degree=max (serving.properties).
    env = {
        "MOE_SERVING_DEFAULT_PROPERTIES": str(REPO / "serving.properties"),
        "OPTION_MOE_BACKEND": "flashinfer_cutlass",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.5",
        "TENSOR_PARALLEL_DEGREE": "2",
    }
    plan = plan_with(env)
    args = list(plan.vllm_args)
    assert plan.moe_backend == "flashinfer_cutlass"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.5"
    assert args[args.index("--tensor-parallel-size") + 1] == "2"


# ------------------------------------------------------------------------------------ the image's built-in model


def _tiny(tmp_path: Path) -> Path:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "serving.properties").write_text("option.max_model_len=512\n")
    return model


def test_with_nothing_at_opt_ml_model_the_fallback_model_is_served_and_its_file_read(tmp_path: Path) -> None:
    assert not Path("/opt/ml/model").exists(), "this test needs a machine without /opt/ml/model"
    tiny = _tiny(tmp_path)
    env = {"MOE_SERVING_FALLBACK_MODEL": str(tiny), "MOE_SERVING_DEFAULT_PROPERTIES": str(tmp_path / "none")}
    settings, reasons = load_settings(environ=env)
    assert settings.model == str(tiny) and settings.options["max_model_len"] == "512"
    assert settings.sources["model_id"] == "env:MOE_SERVING_FALLBACK_MODEL"
    assert any("holds no config.json" in r and str(tiny) in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("environ", "model"),
    [({"OPTION_MODEL_ID": "org/model"}, "org/model"), ({"HF_MODEL_ID": "org/other"}, "org/other")],
    ids=["OPTION_MODEL_ID", "alias"],
)
def test_a_model_the_user_names_beats_the_fallback(tmp_path: Path, environ: dict[str, str], model: str) -> None:
    env = {"MOE_SERVING_FALLBACK_MODEL": str(_tiny(tmp_path)), **environ}
    assert load_settings(environ=env)[0].model == model


def test_a_mounted_model_beats_the_fallback(tmp_path: Path) -> None:
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    env = {"MOE_SERVING_FALLBACK_MODEL": str(_tiny(tmp_path))}
    assert fallback_model(env, model_dir=mounted) is not None  # empty: the fallback applies
    (mounted / "serving.properties").write_text("option.model_id=org/model\n")  # LMI: a file naming a hub model
    assert fallback_model(env, model_dir=mounted) is None
    (mounted / "serving.properties").unlink()
    (mounted / "config.json").write_text("{}")
    assert fallback_model(env, model_dir=mounted) is None
    assert fallback_model({}, model_dir=tmp_path / "absent") is None  # the cuda image sets no fallback


def test_a_fallback_without_a_model_is_a_config_error_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MOE_SERVING_FALLBACK_MODEL=.*holds no config.json"):
        fallback_model({"MOE_SERVING_FALLBACK_MODEL": str(tmp_path)}, model_dir=tmp_path / "absent")


@pytest.mark.parametrize(
    ("environ", "text", "label"),
    [
        ({"OPTION_MOE_BACKEND": "triton"}, "", "OPTION_MOE_BACKEND (option.moe_backend)"),
        ({}, "option.moe_backend=triton\n", "option.moe_backend (in {path})"),
    ],
    ids=["env", "file"],
)
def test_an_option_is_named_where_the_user_set_it(tmp_path: Path, environ: dict[str, str], text: str, label: str):
    path = props_file(tmp_path, text)
    settings, _ = load_settings(model=str(tmp_path), properties=path, environ=environ)
    assert settings.option_label("moe_backend") == label.format(path=path)
    assert settings.option_label("dtype") == "option.dtype"
