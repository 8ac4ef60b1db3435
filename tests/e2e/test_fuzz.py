"""Random bodies at /invocations on the real server: only 2xx/4xx, and it keeps serving."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

scalars = st.none() | st.booleans() | st.integers(-3, 50) | st.floats(-2, 3) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
lmi_parameters = st.fixed_dictionaries(
    {},
    optional={
        "max_new_tokens": st.integers(-2, 24) | st.just(100_000) | json_values,
        "temperature": st.floats(-1, 3) | json_values,
        "top_p": st.floats(-0.5, 1.5),
        "top_k": st.integers(-3, 600),
        "repetition_penalty": st.floats(-1, 3),
        "seed": st.integers(-(2**70), 2**70),
        "do_sample": st.booleans() | json_values,
        "details": st.booleans(),
        "decoder_input_details": st.booleans(),
        "return_full_text": st.booleans(),
        "stop": st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=2),
        "truncate": st.integers(-1, 600),
        "ignore_eos_token": st.booleans(),
        "min_tokens": json_values,
        "logit_bias": json_values,
    },
)
lmi_bodies = st.fixed_dictionaries(
    {"inputs": st.text(max_size=40) | st.lists(st.text(max_size=10), max_size=3) | json_values},
    optional={"parameters": lmi_parameters | json_values, "stream": st.booleans() | json_values},
)
# max_tokens is always sent, and never null: without it vLLM generates up to the context (512 on the tiny model), and
# on a busy 2-core CI machine (6-7 tok/s, 2026-12-06) one such body outlived the client's 60 s
openai_bodies = st.fixed_dictionaries(
    {"max_tokens": st.integers(-1, 16) | json_values.filter(lambda v: v is not None)},
    optional={
        "prompt": st.text(max_size=30) | json_values,
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "system", "x"]) | json_values,
                    "content": st.text(max_size=20) | json_values,
                }
            ),
            max_size=2,
        )
        | json_values,
        "stream": st.booleans(),
        "temperature": st.floats(0, 2),
    },
)
raw_bodies = st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode())
bodies = (
    lmi_bodies.map(lambda b: json.dumps(b).encode()) | openai_bodies.map(lambda b: json.dumps(b).encode()) | raw_bodies
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_random_bodies_get_2xx_or_4xx(client: httpx.Client, body: bytes) -> None:
    response = client.post("/invocations", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code < 500, f"{response.status_code} for {body[:200]!r}: {response.text[:300]}"
    if response.status_code >= 400:
        error: Any = response.json()
        # LMI bodies and non-schema bodies answer LMI's shape; OpenAI bodies keep vLLM's.
        lmi_shape = set(error) == {"code", "error"} and error["code"] == response.status_code
        openai_shape = isinstance(error.get("error"), dict) and isinstance(error["error"].get("message"), str)
        assert lmi_shape or openai_shape, f"{response.status_code} in neither LMI's nor OpenAI's shape: {error}"
    else:
        response.read()  # a stream must end, too


def test_server_still_serves_after_the_fuzz(client: httpx.Client) -> None:
    assert client.get("/ping").status_code == 200
    answer = client.post("/invocations", json={"inputs": "still there?", "parameters": {"max_new_tokens": 3}})
    assert answer.status_code == 200 and "generated_text" in answer.json()
