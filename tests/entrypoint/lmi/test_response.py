"""vLLM's completion answer → LMI's answer: finish reasons, details, batches."""

from __future__ import annotations

from typing import Any

import pytest

from entrypoint.lmi.request import LMIRequest, TgiTokens
from entrypoint.lmi.response import completion_to_lmi, finish_reason_to_lmi

# ---------------------------------------------------------------------------------------------
# finish_reason


@pytest.mark.parametrize(
    ("finish", "stop_reason", "lmi"),
    [
        pytest.param("length", None, "length", id="length stays length"),
        pytest.param("stop", None, "eos_token", id="stop with no stop_reason is the EOS token"),
        pytest.param("stop", 151643, "eos_token", id="stop on a stop token id is an EOS token"),
        pytest.param("stop", "\n\n", "stop_sequence", id="stop on a string is a stop sequence"),
        pytest.param(None, None, None, id="not finished"),
        pytest.param("abort", None, "abort", id="unknown reasons pass through"),
    ],
)
def test_finish_reason_reads_both_vllm_fields(finish: str | None, stop_reason: Any, lmi: str | None) -> None:
    assert finish_reason_to_lmi(finish, stop_reason) == lmi


# ---------------------------------------------------------------------------------------------
# completion_to_lmi

VLLM_ANSWER = {
    "object": "text_completion",
    "choices": [
        {
            "index": 0,
            "text": " model How",
            "logprobs": {"tokens": [" model", " How"], "token_logprobs": [-0.36, -0.37]},
            "finish_reason": "stop",
            "stop_reason": "END",
            "token_ids": [335, 511],
            "prompt_token_ids": [354, 81],
            "prompt_logprobs": [None, {"81": {"logprob": -22.9, "rank": 347, "decoded_token": "o"}}],
        }
    ],
}


def test_completion_becomes_generated_text_only_without_details() -> None:
    assert completion_to_lmi(VLLM_ANSWER, LMIRequest(completion={})) == {"generated_text": " model How"}


def test_completion_details_carry_tokens_and_prefill() -> None:
    """LMI's token objects name the log-probability `log_prob` (djl-serving's Token.as_dict) and its details carry the
    input as `inputs`: LMI's clients read both."""
    req = LMIRequest(completion={}, details=True, decoder_input_details=True, seed=7, inputs=("Hello",))
    assert completion_to_lmi(VLLM_ANSWER, req) == {
        "generated_text": " model How",
        "details": {
            "finish_reason": "stop_sequence",
            "generated_tokens": 2,
            "inputs": "Hello",
            "seed": 7,
            "tokens": [
                {"id": 335, "text": " model", "log_prob": -0.36},
                {"id": 511, "text": " How", "log_prob": -0.37},
            ],
            "prefill": [{"id": 354, "text": None, "log_prob": None}, {"id": 81, "text": "o", "log_prob": -22.9}],
        },
    }


def test_each_answer_of_a_batch_carries_its_own_input() -> None:
    choices = [{"index": 1, "text": " y", "token_ids": [2]}, {"index": 0, "text": " x", "token_ids": [1]}]
    req = LMIRequest(completion={}, batch=True, details=True, inputs=("A", "B"))
    answers = completion_to_lmi({"choices": choices}, req)
    assert [a["details"]["inputs"] for a in answers] == ["A", "B"]
    assert [a["details"]["tokens"] for a in answers] == [
        [{"id": 1, "text": None, "log_prob": None}],
        [{"id": 2, "text": None, "log_prob": None}],
    ]


def test_echoed_prompt_tokens_are_not_counted_as_generated() -> None:
    choice = dict(VLLM_ANSWER["choices"][0])
    choice["logprobs"] = {"tokens": ["Hell", "o", " model", " How"], "token_logprobs": [None, -22.9, -0.36, -0.37]}
    answer = completion_to_lmi({"choices": [choice]}, LMIRequest(completion={}, details=True))
    assert [t["text"] for t in answer["details"]["tokens"]] == [" model", " How"]
    assert answer["details"]["generated_tokens"] == 2


def test_batch_answers_are_a_list_in_input_order() -> None:
    choices = [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}]
    answer = completion_to_lmi({"choices": choices}, LMIRequest(completion={}, batch=True))
    assert answer == [{"generated_text": "a"}, {"generated_text": "b"}]


def test_return_full_text_prepends_each_input_to_its_own_answer() -> None:
    """The prefix comes from the request, not vLLM's echo (dropped by vLLM 0.32 whenever token ids are asked for)."""
    choices = [{"index": 1, "text": " y"}, {"index": 0, "text": " x"}]
    req = LMIRequest(completion={}, batch=True, return_full_text=True, inputs=("A", "B"))
    assert completion_to_lmi({"choices": choices}, req) == [{"generated_text": "A x"}, {"generated_text": "B y"}]


def test_tgis_shape_gives_the_first_prompt_token_a_text_and_every_token_its_special_flag() -> None:
    tgi = TgiTokens(frozenset({511}), lambda token_id: f"<{token_id}>")
    req = LMIRequest(completion={}, details=True, decoder_input_details=True, tgi=tgi)
    details = completion_to_lmi(VLLM_ANSWER, req)["details"]
    assert details["prefill"][0] == {"id": 354, "text": "<354>", "logprob": None}  # TGI's clients need a text
    assert details["prefill"][1]["text"] == "o"  # vLLM's own where it gives one
    assert [t["special"] for t in details["tokens"]] == [False, True]
    without = completion_to_lmi(VLLM_ANSWER, LMIRequest(completion={}, details=True, tgi=tgi))["details"]
    assert without["prefill"] == []  # TGI's Details requires the list
