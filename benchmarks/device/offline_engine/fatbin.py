"""Zero the GPU code an H200 never loads out of shared libraries' fat binaries, so that xz squeezes it to nothing.

A CUDA library carries its kernels as fat binaries (ELF section .nv_fatbin): containers of
entries, one per target (SASS for sm_75, sm_80, ..., sm_120, and PTX). On an sm_90 GPU the CUDA driver loads a
container's sm_90 SASS and reads no other entry's payload. This overwrites, in place, the payload of every SASS entry
built for another architecture in a container that also holds sm_90 (or sm_90a) SASS: the file keeps its size, its
section layout and every entry header, and the sm_90 entries and all PTX entries stay byte for byte. Containers
without sm_90 SASS are left whole. What no H200 loads then compresses to almost nothing.

The container layout (as cuobjdump reads it): a 16-byte header (magic 0xBA55ED50, u16 version, u16 header size,
u64 size of the entries), then entries, each a header (u16 kind: 1 PTX / 2 SASS, u16, u32 header size, u64 payload
size, ..., u32 arch at byte 28) followed by its payload.

    python -m benchmarks.device.offline_engine.fatbin [--arch 90] [--dry-run] FILE...
"""

from __future__ import annotations

import argparse
import mmap
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0xBA55ED50
SECTIONS = (b".nv_fatbin",)  # __nv_relfatbin (relocatable device code, NCCL) is left alone
KIND_PTX, KIND_SASS = 1, 2


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
FLAG_ZSTD = 0x8000  # the entry's payload is a zstd frame (nvcc's default compression since CUDA 12.8)
ZSTD_BLOCK_MAX = 128 * 1024


@dataclass
class Entry:
    offset: int  # of its header, in the file
    header_size: int
    payload_size: int
    kind: int
    arch: int
    flags: int = 0
    compressed_size: int = 0
    uncompressed_size: int = 0

    @property
    def payload(self) -> slice:
        start = self.offset + self.header_size
        return slice(start, start + self.payload_size)


def fatbin_sections(data: bytes | mmap.mmap) -> list[tuple[int, int]]:
    """(file offset, size) of each fat-binary section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)  # fmt: skip
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or not shnum:
        return []
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    out = []
    for i in range(shnum):
        base = shoff + i * shentsize
        name_off, sh_type = struct.unpack_from("<II", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        end = data.find(b"\0", str_off + name_off)
        if data[str_off + name_off : end] in SECTIONS and sh_type != 8:  # 8: NOBITS
            out.append((offset, size))
    return out


def containers(data: bytes | mmap.mmap, start: int, size: int) -> list[list[Entry]]:
    """The entries of each container in a section; raises ValueError where the layout is not the one expected."""
    out = []
    pos, end = start, start + size
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            # containers are 8-aligned; padding between them is zero
            if magic == 0:
                pos += 8
                continue
            raise ValueError(f"no fatbin magic at {pos:#x}")
        entries = []
        epos, eend = pos + header_size, pos + header_size + fat_size
        if eend > end:
            raise ValueError(f"container at {pos:#x} runs past its section")
        while epos < eend:
            kind, _v, eheader, payload, csize = struct.unpack_from("<HHIQI", data, epos)
            arch = struct.unpack_from("<I", data, epos + 28)[0]
            flags, _zero, dsize = struct.unpack_from("<QQQ", data, epos + 40)
            if kind not in (KIND_PTX, KIND_SASS) or eheader < 64 or epos + eheader + payload > eend:
                raise ValueError(f"unexpected entry at {epos:#x} (kind {kind}, header {eheader})")
            entries.append(Entry(epos, eheader, payload, kind, arch, flags, csize, dsize))
            epos += eheader + payload
        containers_end = eend
        out.append(entries)
        pos = containers_end
    return out


def zstd_zeros(size: int) -> bytes:
    """A zstd frame that decompresses to size zero bytes: single segment, run-length blocks of at most 128 KiB."""
    out = bytearray(ZSTD_MAGIC + bytes([0xA0]) + struct.pack("<I", size))  # 4-byte content size, one segment
    left = size
    while True:
        n = min(left, ZSTD_BLOCK_MAX)
        left -= n
        header = int(left == 0) | (1 << 1) | (n << 3)  # last block?, type 1 (RLE), size
        out += struct.pack("<I", header)[:3] + b"\0"
        if left == 0:
            return bytes(out)


def skippable(size: int) -> bytes:
    """A zstd skippable frame of size bytes in all (size >= 8): decoders pass over it."""
    return struct.pack("<II", 0x184D2A50, size - 8) + bytes(size - 8)


def blank(e: Entry) -> bytes | None:
    """What replaces e's payload: zeros, or for a zstd entry a frame that still decompresses (to zeros) and a
    skippable frame to its declared compressed size, so that tools which read every entry (cuobjdump) still
    parse the file. None where the payload is not the layout expected (it is then left alone)."""
    if not e.flags & FLAG_ZSTD:
        return bytes(e.payload_size)
    frame = zstd_zeros(e.uncompressed_size)
    if e.compressed_size > e.payload_size or e.compressed_size - len(frame) < 8:
        return None
    return frame + skippable(e.compressed_size - len(frame)) + bytes(e.payload_size - e.compressed_size)


def plan(entries: list[Entry], arch: int) -> list[Entry]:
    """The entries of one container to zero: SASS for another arch, if the container has SASS for arch."""
    if not any(e.kind == KIND_SASS and e.arch == arch for e in entries):
        return []
    return [e for e in entries if e.kind == KIND_SASS and e.arch != arch]


def strip(path: Path, arch: int = 90, dry_run: bool = False) -> tuple[int, int]:
    """Zero path's SASS for other archs in place; return (bytes zeroed, bytes of fat binaries)."""
    with path.open("r+b" if not dry_run else "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ if dry_run else mmap.ACCESS_WRITE)
        except ValueError:  # empty file
            return 0, 0
        with data:
            sections = fatbin_sections(data)
            todo: list[Entry] = []
            total = 0
            for start, size in sections:
                total += size
                for entries in containers(data, start, size):  # all parsed before anything is written
                    todo += plan(entries, arch)
            done = 0
            for e in todo:
                if data[e.payload][:4] != ZSTD_MAGIC and e.flags & FLAG_ZSTD:
                    continue  # not the layout expected: leave it
                new = blank(e)
                if new is None:
                    continue
                done += e.payload_size
                if not dry_run:
                    data[e.payload] = new
            if not dry_run:
                data.flush()
    return done, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    zeroed_all = 0
    for path in args.files:
        zeroed, total = strip(path, args.arch, args.dry_run)
        zeroed_all += zeroed
        if total:
            print(f"fatbin: {path}: {zeroed / 2**20:.1f} of {total / 2**20:.1f} MiB of GPU code zeroed "
                  f"(not sm_{args.arch})")  # fmt: skip
    print(f"fatbin: {zeroed_all / 2**20:.0f} MiB zeroed in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
