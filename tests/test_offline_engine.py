"""benchmarks/device/offline_engine: the offline engine bundle for the H200 device host. The pure parts, without
network or the real wheels: which lock packages travel, pieces that fit one upload (64 MiB with the tracked tree)
with a margin, sums that catch a bad or missing piece, the host's join byte for byte, the symbol verdict."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from benchmarks.device.offline_engine import bundle, fatbin, fused_moe_90, symcheck
from tests.conftest_paths import REPO

HOST_INSTALL = REPO / "benchmarks/device/offline_engine/host_install.sh"
MIB = 1024 * 1024


def make_bundle(path: Path, files: dict[str, bytes]) -> Path:
    """An engine.tar.xz holding site/<name> for each file, as build_bundle.sh lays it out."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"site/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(["xz", "-0", "-c"], input=raw.getvalue(), stdout=path.open("wb"), check=True)
    return path


def test_the_tree_is_counted_in_whole_disk_blocks(tmp_path: Path) -> None:
    """The upload's size check counts 4 KiB blocks: one byte and 4,097 bytes weigh 4 KiB and 8 KiB there."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "one").write_bytes(b"x")
    (tmp_path / "two").write_bytes(b"y" * 4097)
    (tmp_path / "untracked").write_bytes(b"z" * 9000)
    subprocess.run(["git", "-C", str(tmp_path), "add", "one", "two"], check=True)
    assert bundle.tree_bytes(tmp_path) == 3 * 4096


def test_pieces_fit_an_upload_with_the_tree_and_join_byte_for_byte(tmp_path: Path) -> None:
    limit, tree, margin = 64 * 1024, 10_000, 1024  # an upload's limit scaled down: 64 KiB, the tree 10 kB
    size = bundle.piece_bytes(tree, limit=limit, margin=margin)
    assert size == limit - tree - margin
    data = os.urandom(3 * size + 123)  # three full pieces and a short one
    (tmp_path / "engine.tar.xz").write_bytes(data)
    pieces = bundle.split(tmp_path / "engine.tar.xz", tmp_path / "offline", size)
    assert [p.parent.name for p in pieces] == ["p00", "p01", "p02", "p03"]
    assert [p.name for p in pieces] == [f"engine.tar.xz.part{k:02d}" for k in range(4)]
    assert [p.stat().st_size for p in pieces] == [size, size, size, 123]
    folders = [p.parent for p in pieces]
    assert bundle.check_transfers(folders, tree, limit=limit) == []  # each folder + the tree fits, sums included
    assert all(bundle.folder_bytes(f) + tree <= limit - margin + 1024 for f in folders)  # the margin is kept
    assert b"".join(p.read_bytes() for p in pieces) == data
    sums = {(f / "SHA256SUMS").read_text() for f in folders}
    assert len(sums) == 1  # every folder has the same list: whichever upload comes last, the host has it all
    listed = dict(line.split("  ")[::-1] for line in sums.pop().splitlines())
    assert listed["engine.tar.xz"] == hashlib.sha256(data).hexdigest()
    assert listed["engine.tar.xz.part03"] == hashlib.sha256(data[3 * size :]).hexdigest()
    # one more byte of tree and the fullest folder is over: check_transfers names it
    assert bundle.check_transfers(folders, limit - size - len((folders[0] / "SHA256SUMS").read_bytes()) + 1,
                              limit=limit) == [(f, limit + 1) for f in folders[:3]]  # fmt: skip


def test_no_room_beside_the_tree_is_refused() -> None:
    with pytest.raises(ValueError, match="leaves no room"):
        bundle.piece_bytes(64 * MIB - MIB, limit=64 * MIB, margin=MIB)
    assert bundle.piece_bytes(6_608_593) == 64 * MIB - 6_608_593 - MIB  # today's tree: ~56.7 MiB a piece


def copy_pieces(offline: Path, dest: Path, skip: str = "") -> Path:
    dest.mkdir()
    for folder in sorted(offline.glob("p[0-9][0-9]")):  # each upload: cp .offline/pKK/* /root/pieces/
        for f in folder.iterdir():
            if f.name != skip:
                shutil.copy(f, dest / f.name)
    return dest


def host_install(pieces: Path, prefix: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(HOST_INSTALL), str(pieces), str(prefix)], capture_output=True, text=True,
                          env={**os.environ, "NO_IMPORT_CHECK": "1"})  # fmt: skip


def test_host_install_checks_joins_and_unpacks(tmp_path: Path) -> None:
    files = {"torch/__init__.py": b"__version__ = '2.13.0'\n", "blob.bin": os.urandom(200_000)}
    engine = make_bundle(tmp_path / "engine.tar.xz", files)
    bundle.split(engine, tmp_path / "offline", 70_000)
    assert len(list((tmp_path / "offline").glob("p*"))) == 3
    done = host_install(copy_pieces(tmp_path / "offline", tmp_path / "pieces"), tmp_path / "root")
    assert done.returncode == 0, done.stderr
    for name, data in files.items():
        assert (tmp_path / "root/site" / name).read_bytes() == data
    assert (tmp_path / "root/site/.engine-bundle").read_text().strip() == bundle.sha256(engine)
    again = host_install(tmp_path / "pieces", tmp_path / "root")
    assert again.returncode == 0 and "already installed" in again.stdout


def test_host_install_refuses_a_bad_or_missing_piece(tmp_path: Path) -> None:
    engine = make_bundle(tmp_path / "engine.tar.xz", {"blob.bin": os.urandom(150_000)})
    bundle.split(engine, tmp_path / "offline", 60_000)
    missing = host_install(copy_pieces(tmp_path / "offline", tmp_path / "a", skip="engine.tar.xz.part01"),
                           tmp_path / "root")  # fmt: skip
    assert missing.returncode != 0 and "missing engine.tar.xz.part01" in missing.stderr
    bad = copy_pieces(tmp_path / "offline", tmp_path / "b")
    piece = bad / "engine.tar.xz.part02"
    piece.write_bytes(piece.read_bytes()[:-1] + b"\0")
    refused = host_install(bad, tmp_path / "root")
    assert refused.returncode != 0 and "engine.tar.xz.part02: FAILED" in refused.stdout + refused.stderr
    assert not (tmp_path / "root/site").exists()


def test_host_install_installs_every_module_of_the_moe90_upload_where_flashinfer_finds_a_prebuilt_one(
    tmp_path: Path,
) -> None:
    engine = make_bundle(tmp_path / "engine.tar.xz", {"flashinfer/__init__.py": b""})
    bundle.split(engine, tmp_path / "offline", 70_000)
    pieces = copy_pieces(tmp_path / "offline", tmp_path / "pieces")
    # the CUTLASS MoE module (build_fused_moe_90.sh), the sampler and the autotuner's (build_flashinfer_prebuilt.sh)
    modules = {name: os.urandom(50_000) for name in ("fused_moe_90", "sampling", "trtllm_utils")}
    sums = ""
    for name, module in modules.items():
        packed = pieces / f"{name}.so.xz"
        subprocess.run(["xz", "-0", "-c"], input=module, stdout=packed.open("wb"), check=True)
        sums += f"{bundle.sha256(packed)}  {packed.name}\n"
    (pieces / "SHA256SUMS.moe90").write_text(sums)
    done = host_install(pieces, tmp_path / "root")
    assert done.returncode == 0, done.stderr
    for name, module in modules.items():
        assert (tmp_path / f"root/site/flashinfer/data/aot/{name}/{name}.so").read_bytes() == module
        assert f"FlashInfer {name} installed prebuilt" in done.stdout
    (pieces / "SHA256SUMS.moe90").write_text("0" * 64 + "  fused_moe_90.so.xz\n")  # a transfer that went wrong
    refused = host_install(pieces, tmp_path / "root")
    assert refused.returncode != 0 and "fused_moe_90.so.xz: FAILED" in refused.stdout + refused.stderr


def test_fused_moe_90_prune_keeps_the_fp8_bf16_grouped_gemms_and_relinks_only_them(tmp_path: Path) -> None:
    gen = tmp_path / "generated"
    gen.mkdir()
    fp16_out = (
        "#if defined(ENABLE_FP8) && defined(ENABLE_FP8)\n        INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM("
        "Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, half, 1);\n#endif\n"
    )
    keep = gen / "keep.generated.cu"
    keep.write_text(f"INSTANTIATE(Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16, 1);\n{fp16_out}")
    (gen / "other.generated.cu").write_text("INSTANTIATE(Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, half, 1);\n")  # fp16 out
    sources = {
        "keep.o": keep,
        "other.o": gen / "other.generated.cu",
        "fp8.o": "moe_gemm_kernels_fp8_fp8.cu",
        "bf16.o": "moe_gemm_kernels_bf16_bf16.cu",
        "binding.o": "binding.cu",
    }
    lines = [f"build {obj}: cuda_compile {src}" for obj, src in sources.items()]
    lines.append(f"build m.so: link {' '.join(sources)}")
    (tmp_path / "build.ninja").write_text("\n".join(lines) + "\n")
    assert fused_moe_90.prune(tmp_path, gen) == (3, 2, 1)
    pruned = (tmp_path / "build.pruned.ninja").read_text()
    assert "build m.so: link keep.o fp8.o binding.o" in pruned
    assert "other.o" not in pruned and "bf16.o" not in pruned
    assert "#if 0" in keep.read_text() and "defined(ENABLE_FP8)" not in keep.read_text()
    stubs = fused_moe_90.stubs_source(["_ZN12tensorrt_llm1fEv"])
    assert '__asm__("_ZN12tensorrt_llm1fEv")' in stubs and "abort();" in stubs


def test_selection_follows_the_lock_the_host_and_the_requirements() -> None:
    lock = {"vllm": "0.32.0", "torch": "2.13.0", "pydantic": "2.14.4", "numpy": "2.3.5", "mistral-common": "1.13.1",
            "tokenizers": "0.23.3", "huggingface-hub": "2.4.0", "boto3": "1.44.8", "nvidia-nccl-cu13": "2.29.7",
            "nvidia-cublas": "13.1.1.3", "filelock": "4.3.2"}  # fmt: skip
    host = {"torch": "2.11.0", "numpy": "2.5.2", "tokenizers": "0.23.2", "huggingface-hub": "1.33.0",
            "nvidia-nccl-cu13": "2.28.9", "nvidia-cublas": "13.1.0.3", "filelock": "4.3.2"}  # fmt: skip
    reqs = {"vllm": ["numpy", "tokenizers>=0.23.2", "huggingface_hub>=1.31.0", "pydantic>=2.12",
                     "mistral_common[image]>=1.11.6", "torch==2.13.0", "nvidia-cublas==13.1.1.3",
                     "boto3; extra == 'runai'"],
            "mistral-common": ["numpy<2.4,>=1.25"], "torch": ["filelock", "nvidia-nccl-cu13==2.29.7"]}  # fmt: skip
    nvidia = {"nvidia-nccl-cu13": {"travels": True, "why": "8 symbols missing in 2.28.9"},
              "nvidia-cublas": {"travels": False, "why": "all symbols are exported by 13.1.0.3"}}  # fmt: skip
    sel = bundle.select(lock, host, lambda n: reqs.get(n, []), nvidia)
    assert sorted(sel.travels) == ["mistral-common", "numpy", "nvidia-nccl-cu13", "pydantic", "torch", "vllm"]
    assert sel.why["numpy"] == "mistral-common requires numpy<2.4,>=1.25; the host has 2.5.2"
    assert sel.stays == {"tokenizers": "0.23.2", "huggingface-hub": "1.33.0", "nvidia-cublas": "13.1.0.3",
                         "filelock": "4.3.2"}  # fmt: skip
    assert sel.skipped == {"boto3": "1.44.8"} and "S3" in sel.why["boto3"]  # the host lacks it; SKIPPED says why
    assert sel.why["nvidia-cublas"].startswith("symcheck: all symbols")  # torch's == pin does not decide


def test_every_skipped_package_and_pruned_path_says_why() -> None:
    assert all(why.strip() for why in [*bundle.SKIPPED.values(), *bundle.PRUNED.values()])
    assert not set(bundle.SKIPPED) & set(bundle.ENGINE)
    lock = bundle.read_lock_text((REPO / "docker/cuda-constraints.txt").read_text())
    assert set(bundle.SKIPPED) <= set(lock), "a skipped package is not in the lock any more"
    assert set(bundle.NVIDIA_LIBS) <= set(lock)


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and binutils")
def test_symcheck_names_the_symbols_an_old_library_lacks(tmp_path: Path) -> None:
    def lib(path: Path, source: str, *args: str) -> Path:
        (tmp_path / "src.c").write_text(source)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(tmp_path / "src.c"), *args], check=True)
        return path

    old = lib(tmp_path / "old.so", "int ncclAllReduce(void){return 0;}", "-Wl,-soname,libnccl.so.2")
    new = lib(tmp_path / "new.so", "int ncclAllReduce(void){return 0;} int ncclCommResume(void){return 0;}",
              "-Wl,-soname,libnccl.so.2")  # fmt: skip
    user = lib(tmp_path / "user.so", "int ncclAllReduce(void); int ncclCommResume(void);"
               "int f(void){return ncclAllReduce() + ncclCommResume();}", str(new))  # fmt: skip
    exports_new, exports_old = symcheck.exports_by_soname([new]), symcheck.exports_by_soname([old])
    assert set(exports_new) == set(exports_old) == {"libnccl.so.2"}
    assert "libnccl.so.2" in symcheck.dynamic(user)[1]  # the consumer's NEEDED names the soname
    wanted = symcheck.symbols(user, defined=False)
    used, missing = symcheck.compare(wanted, exports_new["libnccl.so.2"], exports_old["libnccl.so.2"])
    assert used == {("ncclAllReduce", ""), ("ncclCommResume", "")}
    assert missing == ["ncclCommResume"]
    assert symcheck.compare(wanted, exports_new["libnccl.so.2"], exports_new["libnccl.so.2"])[1] == []
    # a versioned reference needs its version: glibc-style nodes
    assert symcheck.compare({("f", "V_2")}, {("f", "V_2")}, {("f", "V_1")})[1] == ["f@V_2"]
    assert symcheck.compare({("f", "")}, {("f", "V_2")}, {("f", "V_1")})[1] == []


def fat_entry(kind: int, arch: int, payload: bytes, zstd: bool) -> bytes:
    """One fat-binary entry as nvcc writes it: a 64-byte header, then the payload."""
    flags = 0x11 | (0x8000 if zstd else 0)
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), len(payload), 0, 0, 0, arch, 0, 0, flags,
                         0, 100_000)  # fmt: skip
    return header + payload


def test_fatbin_blanks_other_sass_only_where_sm90_sass_is_there(tmp_path: Path) -> None:
    sass = {arch: b"\x28\xb5\x2f\xfd" + os.urandom(300) for arch in (80, 90, 100)}
    ptx = os.urandom(200)
    mixed = b"".join(fat_entry(2, a, p, zstd=True) for a, p in sass.items()) + fat_entry(1, 80, ptx, zstd=False)
    only80 = fat_entry(2, 80, sass[80], zstd=True) + fat_entry(1, 80, ptx, zstd=False)
    blob = b"".join(struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, len(c)) + c for c in (mixed, only80))
    found = fatbin.containers(blob, 0, len(blob))
    assert [[(e.kind, e.arch) for e in c] for c in found] == [[(2, 80), (2, 90), (2, 100), (1, 80)], [(2, 80), (1, 80)]]
    todo = fatbin.plan(found[0], 90)
    assert [e.arch for e in todo] == [80, 100] and fatbin.plan(found[1], 90) == []  # no sm_90 there: left whole
    data = bytearray(blob)
    for e in todo:
        new = fatbin.blank(e)
        assert new is not None and len(new) == e.payload_size
        data[e.payload] = new
    after = fatbin.containers(bytes(data), 0, len(data))
    assert [(e.offset, e.kind, e.arch, e.payload_size) for c in after for e in c] == \
        [(e.offset, e.kind, e.arch, e.payload_size) for c in found for e in c]  # fmt: skip
    kept = [e for c in after for e in c if e not in todo]
    assert all(data[e.payload] == blob[e.payload] for e in kept)  # sm_90 SASS, PTX, the sm_80-only container
    if shutil.which("zstd"):  # a blanked zstd entry still decompresses: to its declared size of zeros
        zeros = subprocess.run(["zstd", "-dc"], input=bytes(data[todo[0].payload]), capture_output=True, check=True)
        assert zeros.stdout == bytes(100_000)
