"""Print the [project] dependencies of a pyproject.toml, one per line.

The image installs them in the `deps` stage, before the code is copied, so that editing the code
does not invalidate the layer with the heavy wheels.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path) -> list[str]:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    deps = data.get("project", {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise SystemExit(f"{pyproject}: [project] dependencies must be a list of strings")
    return deps


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: project_requirements.py PYPROJECT_TOML")
    print("\n".join(requirements(Path(sys.argv[1]))))
