"""Secrets (--api-key, --hf-token, HF_TOKEN) never reach what is printed; the argv given to exec keeps them."""

from __future__ import annotations

import json
import os

import pytest

from entrypoint.cli import main
from entrypoint.inputs.gather import build_plan
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.render import render_plan
from entrypoint.serve import plan_log_lines, vllm_command
from entrypoint.utils.redact import (
    REDACTED,
    is_secret_env,
    is_secret_label,
    redact_args,
    redact_env,
    redact_url_userinfo,
)
from sagemaker_deploy.instance_plan import plan_json, plan_text
from tests.conftest_paths import FIXTURE_MODELS

MODEL = str(FIXTURE_MODELS / "qwen3-30b-a3b-fp8")
API_KEY = "sk-SECRET123apikey"
HF_TOKEN = "hf_SECRET456token"
SECRET_OPTIONS = {"OPTION_API_KEY": API_KEY, "OPTION_HF_TOKEN": HF_TOKEN}


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["m", "--api-key", "sk-1", "--port", "8080"], ["m", "--api-key", REDACTED, "--port", "8080"]),
        (["m", "--hf-token", "hf_1"], ["m", "--hf-token", REDACTED]),
        (["m", "--hf_token=hf_1", "--api-key=sk-1"], ["m", "--hf_token=***", "--api-key=***"]),
        # vLLM's bare --hf-token (use the cached login) has no value: the next flag stays readable
        (["m", "--hf-token", "--port", "8080"], ["m", "--hf-token", "--port", "8080"]),
        # counts and paths whose names merely contain a secret word are not secrets
        (["m", "--max-num-batched-tokens", "8192"], ["m", "--max-num-batched-tokens", "8192"]),
        (["m", "--dbo-decode-token-threshold", "32"], ["m", "--dbo-decode-token-threshold", "32"]),
        (["m", "--tokenizer", "org/tok", "--ssl-keyfile", "/k.pem"],
         ["m", "--tokenizer", "org/tok", "--ssl-keyfile", "/k.pem"]),
    ],
    ids=[
        "api key value is hidden",
        "hf token value is hidden",
        "the flag=value form is hidden too",
        "a bare hf-token flag hides nothing after it",
        "batched tokens count stays",
        "token threshold stays",
        "tokenizer and key file paths stay",
    ],
)  # fmt: skip
def test_secret_flag_values_are_hidden(args: list[str], shown: list[str]) -> None:
    assert redact_args(args) == shown


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_SESSION_TOKEN", True),
        ("VLLM_API_KEY", True),
        ("DB_PASSWORD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("OPENAI_APIKEY", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("VLLM_CPU_KVCACHE_SPACE", False),
    ],
)
def test_secret_env_names(name: str, secret: bool) -> None:
    assert is_secret_env(name) is secret
    assert (redact_env({name: "value"})[name] == REDACTED) is secret


def _secret_plan() -> Plan:
    return build_plan(model=MODEL, gpu="H200", num_gpus=8, vllm_version="0.26.0", environ=SECRET_OPTIONS)


def test_the_plan_keeps_the_secrets_for_exec_in_the_environment_not_the_command_line() -> None:
    plan = _secret_plan()
    argv = vllm_command(plan)
    # any user of the host reads a command line (ps); the variables vLLM and the hub client read carry them instead
    assert "--api-key" not in argv and "--hf-token" not in argv and API_KEY not in argv and HF_TOKEN not in argv
    assert plan.env["VLLM_API_KEY"] == API_KEY and plan.env["HF_TOKEN"] == HF_TOKEN
    assert any("option.api_key → env VLLM_API_KEY" in reason for reason in plan.reasons)


@pytest.mark.parametrize(
    "render",
    [
        lambda plan: "\n".join(plan_log_lines(plan)),
        render_plan,
        lambda plan: plan.to_json(),
        lambda plan: plan_text(plan, "ml.p5en.48xlarge"),
        lambda plan: json.dumps(plan_json(plan, "ml.p5en.48xlarge")),
    ],
    ids=["serve startup log", "resolve table", "resolve json", "deploy plan text", "deploy plan json"],
)
def test_every_renderer_hides_the_api_key_and_hf_token(render) -> None:
    shown = render(_secret_plan())
    assert API_KEY not in shown and HF_TOKEN not in shown
    assert "VLLM_API_KEY" in shown and REDACTED in shown


def test_secret_env_values_and_their_echoes_in_reasons_are_hidden() -> None:
    plan = Plan(
        model="m",
        vllm_args=("m", "--api-key", API_KEY),
        env={"HF_TOKEN": HF_TOKEN, "VLLM_CPU_KVCACHE_SPACE": "1"},
        reasons=(f"option.api_key={API_KEY} was given",),
    )
    for shown in ("\n".join(plan_log_lines(plan)), render_plan(plan), plan.to_json()):
        assert API_KEY not in shown and HF_TOKEN not in shown
        assert "VLLM_CPU_KVCACHE_SPACE" in shown and "HF_TOKEN" in shown
    assert plan.env["HF_TOKEN"] == HF_TOKEN  # the plan itself is untouched


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_resolve_cli_prints_no_secret(as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in list(os.environ):
        if name.startswith("OPTION_"):
            monkeypatch.delenv(name)
    for name, value in SECRET_OPTIONS.items():
        monkeypatch.setenv(name, value)
    argv = ["resolve", "--model", MODEL, "--gpu", "H200", "--num-gpus", "8", "--vllm-version", "0.26.0"]
    assert main(argv + (["--json"] if as_json else [])) == 0
    out, err = capsys.readouterr()
    assert "VLLM_API_KEY" in out and "HF_TOKEN" in out
    assert API_KEY not in out + err and HF_TOKEN not in out + err
    if as_json:
        env = json.loads(out)["env"]
        assert env["VLLM_API_KEY"] == REDACTED and env["HF_TOKEN"] == REDACTED


def test_secrets_inside_other_values_are_hidden_and_plain_json_stays_as_written() -> None:
    overrides = json.dumps({"api_key": "sk-inner-999", "rope_scaling": {"factor": 2.0, "auth": {"token": "t0p"}}})
    plan = Plan(
        model="m",
        vllm_args=("m", "--hf-overrides", overrides, f"--served-model-name=https://u:{HF_TOKEN}@hub/m",
                   "--api-key", API_KEY, "--speculative-config", '{"num_speculative_tokens": 3}'),
        env={"HF_TOKEN": HF_TOKEN, "HF_ENDPOINT": f"https://hub?auth={HF_TOKEN}", "EXTRA": '{"secret": "s3cr3t"}'},
    )  # fmt: skip
    for shown in ("\n".join(plan_log_lines(plan)), render_plan(plan), plan.to_json()):
        for secret in ("sk-inner-999", "t0p", HF_TOKEN, API_KEY, "s3cr3t"):
            assert secret not in shown, secret
        assert '"factor":2.0' in shown.replace(" ", "").replace('\\"', '"')  # the rest of the JSON stays
        assert "https://hub?auth=***" in shown
    shown_args = plan.redacted().vllm_args
    assert shown_args[-1] == '{"num_speculative_tokens": 3}'  # nothing secret: left exactly as written
    assert plan.vllm_args[2] == overrides  # the argv for exec is untouched


@pytest.mark.parametrize(
    ("label", "secret"),
    [
        ("option.hf_token", True),
        ("OPTION_API_KEY (option.api_key)", True),
        ("option.hf_token (in /srv/serving.properties)", True),
        ("option.max_model_len (in /srv/my_key_dir/serving.properties)", False),  # a path's words do not count
        ("option.max_num_batched_tokens", False),
        ("option.tokenizer", False),
    ],
)
def test_an_error_label_names_a_secret_by_its_option_not_its_path(label: str, secret: bool) -> None:
    assert is_secret_label(label) is secret


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:hunter2@collector:4317", "http://user:***@collector:4317"),
        ("https://ghp_T0KEN@github.com/o/r.git", "https://***@github.com/o/r.git"),  # a lone part may be the token
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("http://u:p@ss@h/x?next=a@b", "http://u:***@h/x?next=a@b"),  # a raw @ in the password; the query's stays
        ('{"a":"http://h","b":"x@y"}', '{"a":"http://h","b":"x@y"}'),  # never runs out of a JSON string
        ("https://example.com/m and user@mail", "https://example.com/m and user@mail"),
        ("s3://bucket/prefix", "s3://bucket/prefix"),
    ],
    ids=["user and password", "token alone", "password alone", "raw @", "no userinfo in JSON", "no userinfo", "s3"],
)
def test_url_userinfo_is_hidden_and_the_rest_of_the_text_kept(text: str, shown: str) -> None:
    assert redact_url_userinfo(text) == shown


def test_a_url_password_is_hidden_in_every_argv_form_env_value_and_json_value() -> None:
    endpoint = "http://user:hunter2@collector:4317"
    plan = Plan(
        model="m",
        vllm_args=("m", "--otlp-traces-endpoint", endpoint, "--kv-events-config=tcp://k:hunter2@broker:5557",
                   "--kv-transfer-config", json.dumps({"kv_connector": "x", "url": endpoint})),
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
        reasons=(f"option.otlp_traces_endpoint={endpoint} passed on",),
    )  # fmt: skip
    for shown in ("\n".join(plan_log_lines(plan)), render_plan(plan), plan.to_json()):
        assert "hunter2" not in shown
        assert "user:***@collector:4317" in shown and "k:***@broker:5557" in shown
    shown_plan = plan.redacted()
    assert shown_plan.vllm_args[2] == "http://user:***@collector:4317"
    assert shown_plan.vllm_args[3] == "--kv-events-config=tcp://k:***@broker:5557"
    assert json.loads(shown_plan.vllm_args[5]) == {"kv_connector": "x", "url": "http://user:***@collector:4317"}
    assert shown_plan.env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://user:***@collector:4317"
    assert plan.vllm_args[2] == endpoint  # the argv for exec is untouched


def test_an_otlp_endpoints_password_is_not_in_the_startup_log() -> None:
    environ = {"OPTION_OTLP_TRACES_ENDPOINT": "http://user:hunter2@collector:4317"}
    plan = build_plan(model=MODEL, gpu="H200", num_gpus=8, vllm_version="0.32.0", environ=environ)
    log = "\n".join(plan_log_lines(plan))
    assert "hunter2" not in log and "--otlp-traces-endpoint 'http://user:***@collector:4317'" in log
    assert "http://user:hunter2@collector:4317" in vllm_command(plan)  # vLLM still gets the real endpoint
