"""The repository a newcomer reads: links that resolve, results without raw dumps, a front page of one screenful,
and nothing that points outside the checkout.

Each check reads the tracked files (`git ls-files`), so an untracked scratch file neither passes nor fails it.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

from tests.conftest_paths import REPO

README_MAX_LINES = 120
# Pieces, so that this file does not match its own patterns.
RENTAL_WORDS = re.compile(r"\b(?:le" + r"ase[sd]?|idle time" + r"outs?)\b", re.IGNORECASE)
OUTSIDE_POINTER = "../" + "shared"
LAB_FOLDERS = ("benchmarks/", "tools/")
SHIPPED_PATHS = ("entrypoint/", "kernels/", "ops/", "sagemaker_deploy/", "docker/", "Dockerfile", "Makefile")

MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A repository path named in code or prose: docs pages and committed results.
NAMED_PATH = re.compile(r"(?<![\w/.-])((?:docs|benchmarks/results)/[\w./-]*\.(?:md|csv|png|json))\b")


@cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return tuple(p for p in out.splitlines() if (REPO / p).is_file())


def text_files(suffixes: tuple[str, ...]) -> list[str]:
    return [p for p in tracked() if p.endswith(suffixes) or Path(p).name in ("Dockerfile", "Makefile")]


def read(rel: str) -> str:
    return (REPO / rel).read_text(encoding="utf-8", errors="replace")


def test_results_hold_no_raw_logs_or_tarballs() -> None:
    raw = [p for p in tracked() if p.startswith("benchmarks/results/") and p.endswith((".gz", ".log"))]
    assert raw == [], f"{len(raw)} raw files under benchmarks/results (keep CSVs, summaries, plots): {raw[:5]}"


def test_rental_mechanics_stay_in_the_lab() -> None:
    """The words of one GPU-rental setup (RENTAL_WORDS) belong to benchmarks/ and tools/ only."""
    hits = [
        f"{rel}:{n}: {line.strip()[:100]}"
        for rel in text_files((".md", ".py", ".sh", ".toml", ".txt", ".properties"))
        if not rel.startswith(LAB_FOLDERS)
        for n, line in enumerate(read(rel).splitlines(), 1)
        if RENTAL_WORDS.search(line)
    ]
    assert hits == [], "\n".join(hits[:20])


def test_nothing_points_outside_the_checkout() -> None:
    hits = [rel for rel in text_files((".md", ".py", ".sh", ".toml", ".txt")) if OUTSIDE_POINTER in read(rel)]
    assert hits == [], f"files that point at a folder a clone does not have: {hits}"
    shipped = [rel for rel in hits if rel.startswith(SHIPPED_PATHS)]
    assert shipped == []


def test_readme_is_a_front_page() -> None:
    lines = read("README.md").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, more than {README_MAX_LINES}"
    longest = max(lines, key=len)
    assert len(longest) <= 400, f"README.md has a {len(longest)}-character line: {longest[:80]}…"


def test_the_two_commands_are_two() -> None:
    readme = read("README.md")
    section = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```")[1::2]  # every fenced block of the section
    commands = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["make run", "make test"], commands


def test_markdown_links_resolve() -> None:
    broken = []
    for rel in text_files((".md",)):
        for target in MARKDOWN_LINK.findall(read(rel)):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):  # an anchor in the same page, or a URL
                continue
            if not (REPO / rel).parent.joinpath(path).resolve().exists():
                broken.append(f"{rel} → {target}")
    assert broken == [], "\n".join(broken[:30])


def test_named_docs_and_results_paths_exist() -> None:
    """Reasons, comments and prose name docs pages and result files by their repository path: each one exists."""
    missing = sorted(
        {
            f"{rel} → {named}"
            for rel in text_files((".md", ".py", ".sh", ".toml"))
            for named in NAMED_PATH.findall(read(rel))
            if not (REPO / named).exists() and not (REPO / rel).parent.joinpath(named).exists()
        }
    )
    assert missing == [], "\n".join(missing[:30])
