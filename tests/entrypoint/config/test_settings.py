"""Settings precedence, aliases and serving.properties parsing, as LMI reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.config.settings import fallback_model, load_settings, read_properties
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import REPO


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
    return {"MOE_SERVING_DEFAULT_PROPERTIES": str(_props(tmp_path, text, name="image-default.properties"))}


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
    user = _props(tmp_path, "job_queue_size=7\n")
    settings, _ = load_settings(model=str(tmp_path / "model"), properties=user, environ=env)
    assert settings.server["job_queue_size"] == "7"


def test_the_users_file_still_beats_the_environment_when_an_image_default_exists(tmp_path):
    env = {**_image_default(tmp_path, "option.moe_backend=auto\n"), "OPTION_MOE_BACKEND": "triton"}
    model = tmp_path / "model"
    model.mkdir()
    _props(model, "option.moe_backend=flashinfer_cutlass\n")
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


QWEN = str(REPO / "tests/fixtures/models/qwen3-30b-a3b-fp8")


def _plan(environ: dict[str, str], **kw):
    from entrypoint.inputs.gather import build_plan

    return build_plan(model=QWEN, gpu="H200", num_gpus=8, vllm_version="0.26.0", environ=environ, **kw)


def test_env_option_beats_the_repositorys_image_default_file() -> None:
    # The image default sets moe_backend=auto and tensor_parallel_degree=max (serving.properties).
    env = {
        "MOE_SERVING_DEFAULT_PROPERTIES": str(REPO / "serving.properties"),
        "OPTION_MOE_BACKEND": "flashinfer_cutlass",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.5",
        "TENSOR_PARALLEL_DEGREE": "2",
    }
    plan = _plan(env)
    args = list(plan.vllm_args)
    assert plan.moe_backend == "flashinfer_cutlass"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.5"
    assert args[args.index("--tensor-parallel-size") + 1] == "2"


# --- Values that cannot become argv/environment text ---------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"SAGEMAKER_BIND_TO_PORT": "\u00b2"}, "SAGEMAKER_BIND_TO_PORT"),
        ({"SAGEMAKER_BIND_TO_PORT": "\u0668\u0660\u0668\u0660"}, "SAGEMAKER_BIND_TO_PORT"),  # Arabic-Indic 8080
        # named as the user set it: the variable, then the option it stands for
        ({"OPTION_TENSOR_PARALLEL_DEGREE": "\u00b2"}, "OPTION_TENSOR_PARALLEL_DEGREE (option.tensor_parallel_degree)"),
        ({"SM_NUM_GPUS": "abc"}, "SM_NUM_GPUS (option.tensor_parallel_degree)"),
    ],
    ids=["superscript port", "arabic-indic port", "superscript tensor_parallel_degree", "an alias variable"],
)
def test_unicode_digits_are_a_config_error_naming_the_key(environ, key) -> None:
    with pytest.raises(ConfigError) as caught:
        _plan(environ)
    assert caught.value.key == key and caught.value.value == next(iter(environ.values()))
    assert caught.value.accepted


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("option.served_model_name=\\ud800\n", "option.served_model_name"),
        ("option.served_model_name=a\\udc80b\n", "option.served_model_name"),
        ("option.revision=ab\\u0000c\n", "option.revision"),
        ("option.x\\ud800=1\n", "option.x\\ud800"),  # shown escaped
    ],
    ids=["lone high surrogate", "lone low surrogate", "NUL", "surrogate in the key"],
)
def test_unencodable_property_text_is_refused_when_the_file_is_read(tmp_path, line, key) -> None:
    path = _props(tmp_path, line)
    with pytest.raises(ConfigError) as caught:
        read_properties(path)
    assert caught.value.key == key
    assert str(path) in caught.value.reason
    str(caught.value).encode("utf-8")  # the message itself prints: the character is escaped by repr()


@pytest.mark.parametrize("line", ["option.hf_token=SECRET\\u0000NUL\n", "option.api_key=SECRETSUR\\ud800X\n"])
def test_a_refused_secret_value_is_never_shown(tmp_path, line) -> None:
    # the value is what is wrong (NUL, a lone surrogate), yet the message names the key and hides the value
    with pytest.raises(ConfigError) as caught:
        read_properties(_props(tmp_path, line))
    message = str(caught.value)
    assert "SECRET" not in message and "='***'" in message and line.split("=")[0] in message


def test_a_valid_surrogate_pair_escape_is_one_character(tmp_path) -> None:
    assert read_properties(_props(tmp_path, "option.served_model_name=\\ud83d\\ude00\n")) == {
        "option.served_model_name": "\U0001f600"
    }


def test_a_lone_surrogate_escape_in_serving_properties_stops_the_plan(tmp_path: Path) -> None:
    props = _props(tmp_path, "option.served_model_name=\\ud800\n")
    with pytest.raises(ConfigError, match="option.served_model_name"):
        _plan({}, properties=props)


# --- Empty values in the file mean "not set", as empty environment values do --------------------------------


def test_an_empty_file_value_is_left_unset_and_logged(tmp_path) -> None:
    path = _props(tmp_path, "option.quantization=\noption.max_model_len = \nengine=\noption.dtype=bf16\n")
    settings, reasons = load_settings(properties=path, environ={"OPTION_MAX_MODEL_LEN": "4096"})
    assert "quantization" not in settings.options
    assert settings.options["max_model_len"] == "4096"  # the lower layer shows through, as for an empty env value
    assert "engine" not in settings.server
    (line,) = [reason for reason in reasons if "empty value" in reason]
    assert "option.quantization" in line and "option.max_model_len" in line and "engine" in line


def test_an_empty_file_value_never_becomes_an_empty_argv_element(tmp_path) -> None:
    props = _props(tmp_path, "option.quantization=\noption.served_model_name=\n")
    args = list(_plan({}, properties=props).vllm_args)
    assert "" not in args
    assert "--quantization" not in args and "--served-model-name" not in args


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
    path = _props(tmp_path, text)
    settings, _ = load_settings(model=str(tmp_path), properties=path, environ=environ)
    assert settings.option_label("moe_backend") == label.format(path=path)
    assert settings.option_label("dtype") == "option.dtype"


# --- One option set twice; the request-size variable --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "option.max_model_len=256\noption.max_model_len=1024\n",
        "option.max_model_len=256\nOPTION.MAX-MODEL-LEN=1024\n",  # two spellings of one option
    ],
    ids=["the same key", "another spelling"],
)
def test_an_option_set_twice_to_different_values_is_refused_naming_both(tmp_path, text) -> None:
    with pytest.raises(ConfigError) as caught:
        read_properties(_props(tmp_path, text))
    assert "set twice with different values" in str(caught.value) and "256 / 1024" in str(caught.value)
    assert caught.value.key.startswith("option.max_model_len")


def test_an_option_repeated_with_its_value_or_empty_is_fine(tmp_path) -> None:
    text = "option.max_model_len=256\noption.max_model_len=256\noption.dtype=\noption.dtype=bf16\n"
    assert read_properties(_props(tmp_path, text)) == {"option.max_model_len": "256", "option.dtype": "bf16"}


def test_a_secret_set_twice_is_refused_without_its_values(tmp_path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_properties(_props(tmp_path, "option.hf_token=hf_AAAA\noption.hf_token=hf_BBBB\n"))
    assert "hf_AAAA" not in str(caught.value) and "hf_BBBB" not in str(caught.value)


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf", "٦"])
def test_a_bad_request_size_limit_stops_the_start(value) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"SAGEMAKER_MAX_PAYLOAD_IN_MB": value})
    assert caught.value.key == "SAGEMAKER_MAX_PAYLOAD_IN_MB" and caught.value.accepted


def test_a_request_size_limit_in_megabytes_is_accepted_and_named_as_the_middleware_reads_it() -> None:
    from entrypoint.config import settings
    from entrypoint.lmi.middleware import MAX_PAYLOAD_ENV

    assert settings.MAX_PAYLOAD_ENV == MAX_PAYLOAD_ENV
    load_settings(environ={MAX_PAYLOAD_ENV: "6"})
    load_settings(environ={MAX_PAYLOAD_ENV: "0.5"})


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf", "1e999"])
def test_a_warmup_time_limit_the_server_could_only_log_stops_the_start(value) -> None:
    """Inside vLLM's server a bad MOE_WARMUP_TIMEOUT_S can only be warned about (and `inf` would hold /ping for
    ever); at the start it is refused, named, with what it takes."""
    from entrypoint.config import settings
    from entrypoint.lmi.warmup_gate import TIMEOUT_ENV

    assert settings.WARMUP_TIMEOUT_ENV == TIMEOUT_ENV
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={TIMEOUT_ENV: value})
    assert caught.value.key == TIMEOUT_ENV and "seconds" in str(caught.value)
    load_settings(environ={TIMEOUT_ENV: "900"})


# --- One setting, two names: the LMI name and its vLLM twin ---------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "flag", "expected"),
    [
        ({"OPTION_TENSOR_PARALLEL_SIZE": "2"}, "--tensor-parallel-size", "2"),
        # (this checkpoint's experts split whole FP8 blocks at most 2 ways, not the default's max = 8)
        ({"OPTION_MAX_NUM_SEQS": "128", "OPTION_TENSOR_PARALLEL_DEGREE": "2"}, "--max-num-seqs", "128"),
    ],
    ids=["tensor_parallel_size over the default's tensor_parallel_degree", "max_num_seqs over max_rolling_batch_size"],
)
def test_a_vllm_name_in_the_environment_replaces_its_lmi_twin_from_the_image_default(environ, flag, expected) -> None:
    """The image default sets tensor_parallel_degree=max and max_rolling_batch_size=64; a deployment that sets the
    vLLM name of either gets what it set, as it would with the LMI name."""
    plan = _plan({"MOE_SERVING_DEFAULT_PROPERTIES": str(REPO / "serving.properties"), **environ})
    args = list(plan.vllm_args)
    assert args[args.index(flag) + 1] == expected and args.count(flag) == 1
    assert any(f"from env:{next(iter(environ))} (over file:" in reason for reason in plan.reasons)


def test_twins_set_in_one_layer_with_different_values_are_still_refused_naming_where(tmp_path) -> None:
    user = _props(tmp_path, "option.tensor_parallel_degree=2\noption.tensor_parallel_size=4\n")
    with pytest.raises(ConfigError) as caught:
        _plan({}, properties=user)
    assert (
        caught.value.key == (f"option.tensor_parallel_degree (in {user}) / option.tensor_parallel_size (in {user})")
        and caught.value.value == "2 / 4"
    )


def test_two_environment_spellings_of_one_option_with_different_values_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"OPTION_MAX_MODEL_LEN": "4096", "OPTION_max_model_len": "8192"})
    assert caught.value.key == "OPTION_MAX_MODEL_LEN / OPTION_max_model_len"
    assert "different values" in str(caught.value) and "4096 / 8192" in str(caught.value)
    settings, _ = load_settings(environ={"OPTION_MAX_MODEL_LEN": "4096", "OPTION_max_model_len": "4096"})
    assert settings.options["max_model_len"] == "4096"


def test_a_byte_order_mark_does_not_hide_the_first_line(tmp_path) -> None:
    path = tmp_path / "serving.properties"
    path.write_bytes("option.max_model_len=4096\n".encode("utf-8-sig"))
    assert read_properties(path) == {"option.max_model_len": "4096"}
