"""Can the engine's shared libraries run on the H200 host's older NVIDIA CUDA libraries?

The host has torch 2.11's nvidia-* wheels (the versions of the old lock, 6b1130f:docker/cuda-constraints.txt); the
image's torch 2.13 / vLLM 0.32 / FlashInfer 0.7 were built against the lock's (docker/cuda-constraints.txt). For
every nvidia package whose version differs, this reads the dynamic symbols (with their ELF symbol versions) that
each ELF file of the staged site imports from that package's libraries (the file's DT_NEEDED sonames, the symbols
the new library exports) and looks them up in what the old library exports. A package whose needed symbols are all
exported by the old version stays on the host; otherwise it travels. Packages of equal version trivially stay.

    python -m benchmarks.device.offline_engine.symcheck --lock docker/cuda-constraints.txt --new-wheels D \
        --old-wheels D --site STAGE/site --out verdict.json

Only what the dynamic linker checks is checked: a library that is dlopen()ed and looked up with dlsym (torch's
lazy NVRTC, cuDNN's own sub-libraries, ctypes users) is out of reach of nm; the verdict lists which of those exist.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks.device.offline_engine.bundle import NVIDIA_LIBS, old_lock_text, read_lock_text

ELF_MAGIC = b"\x7fELF"
SONAME_RE = re.compile(r"\(SONAME\)\s+Library soname: \[(.+)\]")
NEEDED_RE = re.compile(r"\(NEEDED\)\s+Shared library: \[(.+)\]")


def wheel_for(wheels: Path, name: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    hits = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
    if len(hits) != 1:
        raise SystemExit(f"symcheck: want one wheel {stem}-{version}-*.whl in {wheels}, found {len(hits)}")
    return hits[0]


def extract_libs(wheel: Path, dest: Path) -> list[Path]:
    """The wheel's shared libraries (`*.so`, `*.so.N`), unpacked under dest."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if re.search(r"\.so(\.\d+)*$", info.filename) and not info.is_dir():
                z.extract(info, dest)
                out.append(dest / info.filename)
    return out


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def dynamic(path: Path) -> tuple[str | None, list[str]]:
    """(soname, needed sonames) of an ELF file."""
    text = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True).stdout
    soname = SONAME_RE.search(text)
    return (soname.group(1) if soname else None), NEEDED_RE.findall(text)


def symbols(path: Path, defined: bool) -> set[tuple[str, str]]:
    """(name, version or '') of the dynamic symbols an ELF file exports (defined) or imports (undefined)."""
    flag = "--defined-only" if defined else "--undefined-only"
    text = subprocess.run(["nm", "-D", flag, "--with-symbol-versions", str(path)],
                          capture_output=True, text=True).stdout  # fmt: skip
    out = set()
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        sym = parts[-1]
        if defined and len(parts) == 3 and parts[1] in "Uvw":
            continue
        name, _, version = sym.partition("@")
        out.add((name, version.lstrip("@")))
    return out


def exports_by_soname(libs: list[Path]) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for lib in libs:
        if lib.is_symlink() or not is_elf(lib):
            continue
        soname, _ = dynamic(lib)
        out.setdefault(soname or lib.name, set()).update(symbols(lib, defined=True))
    return out


def compare(wanted: set[tuple[str, str]], new: set[tuple[str, str]], old: set[tuple[str, str]]):
    """(the symbols of wanted that the new library exports, those of them the old one lacks as `name[@version]`).
    An unversioned reference binds to any version of its name; a versioned one needs that version."""
    new_names = {name for name, _ in new}
    used = {s for s in wanted if s[0] in new_names}
    old_names = {name for name, _ in old}
    missing = sorted(f"{n}@{v}" if v else n for n, v in used if (n, v) not in old and not (not v and n in old_names))
    return used, missing


def consumers(site: Path) -> list[Path]:
    found = []
    for path in sorted(site.rglob("*")):
        if path.is_file() and not path.is_symlink() and re.search(r"\.so(\.\d+)*$", path.name) and is_elf(path):
            found.append(path)
    return found


def check(lock: dict[str, str], old: dict[str, str], new_wheels: Path, old_wheels: Path, site: Path) -> dict:
    verdict: dict = {"packages": {}, "consumers_checked": 0}
    with tempfile.TemporaryDirectory(prefix="symcheck-") as tmp:
        differing = {}
        for pkg in NVIDIA_LIBS:
            new_v, old_v = lock.get(pkg), old.get(pkg)
            entry = {"image": new_v, "host": old_v}
            if new_v is None or old_v is None:
                entry.update(travels=new_v is not None and old_v is None, why="not in both locks")
            elif new_v == old_v:
                entry.update(travels=False, why="same version on the host")
            else:
                new_libs = extract_libs(wheel_for(new_wheels, pkg, new_v), Path(tmp) / "new" / pkg)
                old_libs = extract_libs(wheel_for(old_wheels, pkg, old_v), Path(tmp) / "old" / pkg)
                differing[pkg] = (exports_by_soname(new_libs), exports_by_soname(old_libs))
                entry.update(sonames=sorted(differing[pkg][0]), users={}, missing={})
            verdict["packages"][pkg] = entry
        files = consumers(site)
        verdict["consumers_checked"] = len(files)
        for path in files:
            _, needed = dynamic(path)
            wanted = None
            for pkg, (new_exports, old_exports) in differing.items():
                for soname in needed:
                    if soname not in new_exports:
                        continue
                    if wanted is None:
                        wanted = symbols(path, defined=False)
                    used, missing = compare(wanted, new_exports[soname], old_exports.get(soname, set()))
                    rel = str(path.relative_to(site))
                    entry = verdict["packages"][pkg]
                    entry["users"][rel] = len(used)
                    if missing:
                        entry["missing"][rel] = missing
        for pkg in differing:
            entry = verdict["packages"][pkg]
            entry["travels"] = bool(entry["missing"])
            n_users = len(entry["users"])
            entry["why"] = (f"{sum(len(m) for m in entry['missing'].values())} symbols missing in {entry['host']}"
                            if entry["missing"] else
                            f"all symbols {n_users} files import are exported by {entry['host']}")  # fmt: skip
    return verdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock", type=Path, required=True)
    ap.add_argument("--old-lock-rev", default="6b1130f", help="the git revision of the host's (old) lock")
    ap.add_argument("--new-wheels", type=Path, required=True)
    ap.add_argument("--old-wheels", type=Path, required=True)
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    lock, old = read_lock_text(args.lock.read_text()), read_lock_text(old_lock_text(args.old_lock_rev))
    verdict = check(lock, old, args.new_wheels, args.old_wheels, args.site)
    args.out.write_text(json.dumps(verdict, indent=1, sort_keys=True) + "\n")
    for pkg, entry in verdict["packages"].items():
        state = "TRAVELS" if entry["travels"] else "stays  "
        print(f"symcheck: {state} {pkg:24} image {entry['image']:12} host {entry['host']:12} {entry['why']}")
        for rel, missing in sorted(entry.get("missing", {}).items()):
            print(f"symcheck:     {rel}: {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
