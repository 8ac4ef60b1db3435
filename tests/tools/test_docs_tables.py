"""The generated tables in docs/ are current, and the check notices when one is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest_paths import REPO
from tools import docs_tables


@pytest.mark.parametrize("relative", sorted(docs_tables.SECTIONS))
def test_the_committed_file_is_what_the_generator_writes(relative: str) -> None:
    committed = (REPO / relative).read_text(encoding="utf-8")
    assert committed == docs_tables.expected(relative), f"{relative} is stale: run `{docs_tables.COMMAND}`"


def test_every_option_and_rule_appears_in_its_table() -> None:
    configuration = (REPO / "docs/configuration.md").read_text(encoding="utf-8")
    rules = (REPO / "docs/resolver-rules.md").read_text(encoding="utf-8")
    from entrypoint.config.lmi_options import LMI_OPTIONS
    from entrypoint.resolve.rules import RULES

    assert LMI_OPTIONS and RULES
    assert all(f"| `option.{option.key}` |" in configuration for option in LMI_OPTIONS)
    assert all(f"| `{rule.id}` |" in rules for rule in RULES)


def _copy(tmp_path: Path) -> Path:
    for relative in docs_tables.SECTIONS:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / relative, tmp_path / relative)
    return tmp_path


def test_check_fails_naming_the_file_when_a_generated_row_is_edited(tmp_path, capsys) -> None:
    root = _copy(tmp_path)
    assert docs_tables.main(["--check"], root=root) == 0
    path = root / "docs/resolver-rules.md"
    path.write_text(path.read_text(encoding="utf-8").replace("`triton`", "`marlin`", 1), encoding="utf-8")
    assert docs_tables.main(["--check"], root=root) == 1
    assert "docs/resolver-rules.md is stale: run `python -m tools.docs_tables --write`" in capsys.readouterr().err
    assert docs_tables.main(["--write"], root=root) == 0
    assert docs_tables.main(["--check"], root=root) == 0
    assert path.read_text(encoding="utf-8") == (REPO / "docs/resolver-rules.md").read_text(encoding="utf-8")


def test_hand_written_text_outside_the_markers_is_kept(tmp_path) -> None:
    root = _copy(tmp_path)
    path = root / "docs/configuration.md"
    path.write_text(path.read_text(encoding="utf-8") + "\nA note written by hand.\n", encoding="utf-8")
    assert docs_tables.main(["--check"], root=root) == 0
    assert docs_tables.expected("docs/configuration.md", root).endswith("\nA note written by hand.\n")


def test_a_file_without_its_markers_is_an_error_naming_them(tmp_path) -> None:
    root = _copy(tmp_path)
    (root / "docs/configuration.md").write_text("# nothing generated here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no generated section 'options'"):
        docs_tables.expected("docs/configuration.md", root)
