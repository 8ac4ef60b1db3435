"""Values the settings refuse or normalise: text that cannot become argv, empty values, one option set twice or
under two names, the request-size and warm-up limits, a byte-order mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.config.settings import load_settings, read_properties
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import REPO
from tests.entrypoint.config.settings_cases import plan_with, props_file

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
        plan_with(environ)
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
    path = props_file(tmp_path, line)
    with pytest.raises(ConfigError) as caught:
        read_properties(path)
    assert caught.value.key == key
    assert str(path) in caught.value.reason
    str(caught.value).encode("utf-8")  # the message itself prints: the character is escaped by repr()


@pytest.mark.parametrize("line", ["option.hf_token=SECRET\\u0000NUL\n", "option.api_key=SECRETSUR\\ud800X\n"])
def test_a_refused_secret_value_is_never_shown(tmp_path, line) -> None:
    # the value is what is wrong (NUL, a lone surrogate), yet the message names the key and hides the value
    with pytest.raises(ConfigError) as caught:
        read_properties(props_file(tmp_path, line))
    message = str(caught.value)
    assert "SECRET" not in message and "='***'" in message and line.split("=")[0] in message


def test_a_valid_surrogate_pair_escape_is_one_character(tmp_path) -> None:
    assert read_properties(props_file(tmp_path, "option.served_model_name=\\ud83d\\ude00\n")) == {
        "option.served_model_name": "\U0001f600"
    }


def test_a_lone_surrogate_escape_in_serving_properties_stops_the_plan(tmp_path: Path) -> None:
    props = props_file(tmp_path, "option.served_model_name=\\ud800\n")
    with pytest.raises(ConfigError, match="option.served_model_name"):
        plan_with({}, properties=props)


# --- Empty values in the file mean "not set", as empty environment values do --------------------------------


def test_an_empty_file_value_is_left_unset_and_logged(tmp_path) -> None:
    path = props_file(tmp_path, "option.quantization=\noption.max_model_len = \nengine=\noption.dtype=bf16\n")
    settings, reasons = load_settings(properties=path, environ={"OPTION_MAX_MODEL_LEN": "4096"})
    assert "quantization" not in settings.options
    assert settings.options["max_model_len"] == "4096"  # the lower layer shows through, as for an empty env value
    assert "engine" not in settings.server
    (line,) = [reason for reason in reasons if "empty value" in reason]
    assert "option.quantization" in line and "option.max_model_len" in line and "engine" in line


def test_an_empty_file_value_never_becomes_an_empty_argv_element(tmp_path) -> None:
    props = props_file(tmp_path, "option.quantization=\noption.served_model_name=\n")
    args = list(plan_with({}, properties=props).vllm_args)
    assert "" not in args
    assert "--quantization" not in args and "--served-model-name" not in args


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
        read_properties(props_file(tmp_path, text))
    assert "set twice with different values" in str(caught.value) and "256 / 1024" in str(caught.value)
    assert caught.value.key.startswith("option.max_model_len")


def test_an_option_repeated_with_its_value_or_empty_is_fine(tmp_path) -> None:
    text = "option.max_model_len=256\noption.max_model_len=256\noption.dtype=\noption.dtype=bf16\n"
    assert read_properties(props_file(tmp_path, text)) == {"option.max_model_len": "256", "option.dtype": "bf16"}


def test_a_secret_set_twice_is_refused_without_its_values(tmp_path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_properties(props_file(tmp_path, "option.hf_token=hf_AAAA\noption.hf_token=hf_BBBB\n"))
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
    plan = plan_with({"MOE_SERVING_DEFAULT_PROPERTIES": str(REPO / "serving.properties"), **environ})
    args = list(plan.vllm_args)
    assert args[args.index(flag) + 1] == expected and args.count(flag) == 1
    assert any(f"from env:{next(iter(environ))} (over file:" in reason for reason in plan.reasons)


def test_twins_set_in_one_layer_with_different_values_are_still_refused_naming_where(tmp_path) -> None:
    user = props_file(tmp_path, "option.tensor_parallel_degree=2\noption.tensor_parallel_size=4\n")
    with pytest.raises(ConfigError) as caught:
        plan_with({}, properties=user)
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
