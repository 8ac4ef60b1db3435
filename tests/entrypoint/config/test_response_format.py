"""option.tgi_compat and option.output_formatter: parsed into the answer format, written into the server's
environment by the plan, and read back by the LMI middleware (entrypoint.utils.response_format)."""

from __future__ import annotations

import pytest

from entrypoint.config.response_format import parse_response_format
from entrypoint.config.settings import load_settings
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.response_format import STREAM_FORMAT_ENV, TGI_COMPAT_ENV, ResponseFormat, StreamFormat

LMI = ResponseFormat(StreamFormat.JSONLINES, tgi_compat=False)
TGI = ResponseFormat(StreamFormat.SSE, tgi_compat=True)


@pytest.mark.parametrize(
    ("formatter", "compat", "expected"),
    [
        (None, None, LMI),
        ("json", "false", LMI),  # LMI's own default names
        ("JSONLines", None, LMI),
        (None, "true", TGI),  # tgi_compat streams as SSE, as LMI's does
        (None, "TRUE", TGI),
        (None, "1", TGI),  # LMI's pydantic boolean spellings
        (None, "no", LMI),
        ("jsonlines", "true", ResponseFormat(StreamFormat.JSONLINES, tgi_compat=True)),  # the formatter says
        ("sse", None, ResponseFormat(StreamFormat.SSE, tgi_compat=False)),
    ],
)
def test_the_two_options_give_the_format(formatter: str | None, compat: str | None, expected: ResponseFormat) -> None:
    assert parse_response_format(formatter, compat) == expected


@pytest.mark.parametrize(
    ("formatter", "compat", "message"),
    [
        ("json_chat", None, "option.output_formatter='json_chat': not a formatter this server has (LMI's chat"),
        ("my_module.format", None, "Accepted: json, jsonlines, sse"),
        (None, "maybe", "option.tgi_compat='maybe': not a boolean. Accepted: true, false"),
        ("none", None, "option.output_formatter='none': LMI's raw text/plain answers are not supported here"),
    ],
)
def test_a_value_this_server_cannot_honour_is_refused_naming_it(formatter: str | None, compat: str | None,
                                                                message: str) -> None:  # fmt: skip
    with pytest.raises(ConfigError) as err:
        parse_response_format(formatter, compat)
    assert message in str(err.value)


def test_the_settings_read_them_from_the_environment_as_lmi_does(tmp_path) -> None:
    settings, _ = load_settings(model=str(tmp_path), environ={"OPTION_TGI_COMPAT": "true"})
    assert settings.response_format == TGI
    assert "tgi_compat" not in settings.options  # a typed option: never an engine argument


def test_the_environment_round_trip_and_lmis_default_without_it() -> None:
    assert ResponseFormat.from_env(TGI.env()) == (TGI, None)
    assert TGI.env() == {STREAM_FORMAT_ENV: "sse", TGI_COMPAT_ENV: "true"}
    assert ResponseFormat.from_env({}) == (LMI, None)  # a server started without the plan answers as LMI
