"""Settings precedence, aliases and serving.properties parsing, as LMI reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.errors import ConfigError
from entrypoint.settings import load_settings, read_properties


def _props(tmp_path: Path, text: str, name: str = "serving.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


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
    path = _props(tmp_path, properties)
    settings, _ = load_settings(properties=path, environ=environ)
    assert settings.options.get(key) == expected


def test_the_model_directory_properties_file_is_read(tmp_path):
    _props(tmp_path, "option.max_model_len=777\nengine=Python\n")
    settings, reasons = load_settings(model=str(tmp_path), environ={})
    assert settings.options["max_model_len"] == "777"
    assert settings.server == {"engine": "Python"}
    assert "model directory" in reasons[0]


def test_an_explicit_properties_path_beats_the_model_directory(tmp_path):
    _props(tmp_path, "option.max_model_len=1\n")
    explicit = _props(tmp_path, "option.max_model_len=2\n", name="other.properties")
    settings, _ = load_settings(model=str(tmp_path), properties=explicit, environ={})
    assert settings.options["max_model_len"] == "2"


def test_the_image_default_is_read_when_the_model_has_none(tmp_path):
    default = _props(tmp_path, "option.moe_backend=auto\n", name="default.properties")
    settings, reasons = load_settings(
        model=str(tmp_path / "model"), environ={"MOE_SERVING_DEFAULT_PROPERTIES": str(default)}
    )
    assert settings.options["moe_backend"] == "auto"
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
