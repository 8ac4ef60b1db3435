"""Make this checkout's entry points visible to vLLM on a host where the project runs from PYTHONPATH.

vLLM loads general plugins through importlib.metadata entry points (vllm.plugins.load_plugins_by_group), which
come from an installed distribution's metadata, not from a folder on PYTHONPATH: on the H200 device the repo runs
from PYTHONPATH, so without this the plan's MOE_SERVING_MOE_KERNEL=project reaches an engine that never loads the
plugin (seen 2026-12-01: the plan row ran vLLM's kernel, 1.001x the plan without it). The image installs the wheel
and needs none of this. Writes SITE/moe_serving-VERSION.dist-info with pyproject.toml's entry points, plus the
lab's own plugin (LAB_ENTRY_POINTS: the `hot_experts` routing of benchmarks/e2e/routing_plugin.py), which the wheel
and the image never carry.

    python3 -m benchmarks.device.register_entry_points /root/site
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_ENTRY_POINTS = {"vllm.general_plugins": {"moe_serving_lab_routing": "benchmarks.e2e.routing_plugin:register"}}


def write(site: Path) -> Path:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    entry_points = {group: dict(entries) for group, entries in project.get("entry-points", {}).items()}
    for group, entries in LAB_ENTRY_POINTS.items():
        entry_points.setdefault(group, {}).update(entries)
    groups = [
        f"[{group}]\n" + "".join(f"{key} = {target}\n" for key, target in entries.items())
        for group, entries in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(groups))
    return info


if __name__ == "__main__":
    print(f"register_entry_points: wrote {write(Path(sys.argv[1]))}")
