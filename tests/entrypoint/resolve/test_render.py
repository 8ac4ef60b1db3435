"""One renderer: every layout shows the same facts of a plan, secrets hidden."""

from __future__ import annotations

from entrypoint.inputs.gather import build_plan
from entrypoint.resolve.render import Layout, plan_rows, render_plan
from entrypoint.serve import plan_log_lines
from sagemaker_deploy.instance_plan import plan_text
from tests.conftest_paths import FIXTURE_MODELS

MIXTRAL = str(FIXTURE_MODELS / "mixtral-8x7b-instruct-v0.1-fp8")


def _plan():
    return build_plan(model=MIXTRAL, gpu="H200", num_gpus=8, vllm_version="0.26.0", environ={})


def test_resolve_serve_and_deploy_show_every_row_and_every_reason() -> None:
    plan = _plan()
    views = {
        "resolve": render_plan(plan),
        "serve": "\n".join(plan_log_lines(plan)),
        "deploy": plan_text(plan, "ml.p5e.48xlarge"),
    }
    rows = plan_rows(plan)
    assert [label for label, _ in rows] == ["model", "gpu", "quantization", "moe backend", "vllm", "env", "command"]
    for name, text in views.items():
        for _, value in rows:
            assert value in text, (name, value)
        for reason in plan.reasons:
            assert reason in text, (name, reason)


def test_the_table_aligns_its_rows_and_the_log_has_one_line_per_fact() -> None:
    plan = _plan()
    table = render_plan(plan).splitlines()
    assert table[3].startswith("moe backend   triton (source: rule:fp8-tensor-static-hopper-triton; runs: triton;")
    lines = render_plan(plan, Layout.LINES).splitlines()
    assert lines[3].startswith("moe backend: triton (source: rule:")
    assert lines[6] == "exec: vllm serve " + " ".join(plan.vllm_args)  # what serve execs next
    assert [line for line in lines if line.startswith("reason: ")] == [f"reason: {r}" for r in plan.reasons]


def test_deploy_puts_its_instance_row_first() -> None:
    first = plan_text(_plan(), "ml.p5e.48xlarge").splitlines()[0]
    assert first == "instance      ml.p5e.48xlarge (8x H200)"


def test_the_command_line_shown_is_shell_quoted_as_one_argv() -> None:
    """Option values are argv elements, never shell text; the line shown must paste back into a shell as that argv."""
    import shlex

    name = "x; touch /tmp/pwned"
    plan = build_plan(
        model=MIXTRAL, gpu="H200", num_gpus=8, vllm_version="0.26.0", environ={"OPTION_SERVED_MODEL_NAME": name}
    )
    (command,) = [value for label, value in plan_rows(plan) if label == "command"]
    assert shlex.split(command) == ["vllm", "serve", *plan.vllm_args] and f"'{name}'" in command
