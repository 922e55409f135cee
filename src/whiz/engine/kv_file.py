"""One prefix-cache file: a sequence's KV state, the tokens it holds, and what it was made with.

Layout: magic, a little-endian u32 header length, a JSON header, the tokens (int32 LE), then the
state bytes as llama.cpp serialized them. The header names the identity the state belongs to
(model hash, engine build, KV settings), the token count and hash, and a CRC of the state, so a
file from another model, a truncated write or a flipped bit is recognized before llama.cpp sees
it: restoring foreign or damaged cells would not fail loudly, it would quietly change the output.
Files are written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"WHIZKV\x00\x01"
VERSION = 1
SUFFIX = ".kv"
_HEAD = struct.Struct("<8sI")
_MAX_HEADER_BYTES = 1 << 20


class BadKVFile(Exception):
    """A file that is not a complete, intact prefix-cache entry."""


def tokens_sha256(tokens: np.ndarray) -> str:
    return hashlib.sha256(tokens.astype("<i4").tobytes()).hexdigest()


@dataclass(frozen=True)
class KVHeader:
    """What a file says about itself; `data_offset` is where the state bytes start."""

    fingerprint: str
    identity: dict
    scope: str
    """Whose prompt it was (a hash of the tenant, or ""): entries are shared only within one."""
    tokens: np.ndarray
    data_bytes: int
    data_crc32: int
    data_offset: int


def write(
    path: Path,
    *,
    fingerprint: str,
    identity: dict,
    scope: str,
    tokens: np.ndarray,
    data: bytes | bytearray,
) -> int:
    """Write an entry atomically (temporary file, then rename); return its size in bytes."""
    toks = tokens.astype("<i4")
    header = json.dumps(
        {
            "version": VERSION,
            "fingerprint": fingerprint,
            "identity": identity,
            "scope": scope,
            "n_tokens": len(toks),
            "tokens_sha256": tokens_sha256(toks),
            "data_bytes": len(data),
            "data_crc32": zlib.crc32(data),
        },
        sort_keys=True,
    ).encode()
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        with tmp.open("wb") as f:
            f.write(_HEAD.pack(MAGIC, len(header)))
            f.write(header)
            f.write(toks.tobytes())
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return _HEAD.size + len(header) + 4 * len(toks) + len(data)


def read_header(path: Path) -> KVHeader:
    """The header and tokens of an entry, checked against the file's size; BadKVFile if not sound."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD.size)
            if len(head) != _HEAD.size:
                raise BadKVFile("shorter than its header")
            magic, header_len = _HEAD.unpack(head)
            if magic != MAGIC:
                raise BadKVFile("not a whiz prefix-cache file (or another format version)")
            if header_len > _MAX_HEADER_BYTES:
                raise BadKVFile("header too long")
            header = json.loads(f.read(header_len))
            n_tokens, data_bytes = int(header["n_tokens"]), int(header["data_bytes"])
            raw = f.read(4 * n_tokens)
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadKVFile(f"unreadable header ({exc})") from None
    if header.get("version") != VERSION:
        raise BadKVFile(f"format version {header.get('version')}, not {VERSION}")
    tokens = np.frombuffer(raw, dtype="<i4")
    if len(tokens) != n_tokens or tokens_sha256(tokens) != header.get("tokens_sha256"):
        raise BadKVFile("its tokens do not match their hash")
    data_offset = _HEAD.size + header_len + 4 * n_tokens
    if size != data_offset + data_bytes:
        raise BadKVFile(f"{size} bytes where the header promises {data_offset + data_bytes} (truncated?)")
    return KVHeader(
        fingerprint=str(header.get("fingerprint")),
        identity=header.get("identity") or {},
        scope=str(header.get("scope", "")),
        tokens=tokens,
        data_bytes=data_bytes,
        data_crc32=int(header.get("data_crc32", -1)),
        data_offset=data_offset,
    )


def read_data(path: Path, header: KVHeader) -> bytearray:
    """The state bytes of an entry whose header was read, checked against their CRC."""
    data = bytearray(header.data_bytes)
    try:
        with path.open("rb") as f:
            f.seek(header.data_offset)
            got = f.readinto(data)
    except OSError as exc:
        raise BadKVFile(f"unreadable ({exc})") from None
    if got != header.data_bytes:
        raise BadKVFile("truncated since it was indexed")
    if zlib.crc32(data) != header.data_crc32:
        raise BadKVFile("its state does not match its checksum")
    return data
