"""Files and images in a request's content, for a model that reads text only.

An `input_file` part whose `file_data` holds a text file (base64, or a base64 `data:` URL) is
read into the prompt as text, under its file name. Everything else a text model cannot read gets
a 400 that names the field and says what to send instead: a binary file, a `file_url` (the server
reaches no network), a `file_id` (whiz keeps no uploaded files), an image.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import unquote_to_bytes

from whiz.errors import InvalidRequest

IMAGE_PARTS = ("input_image", "image_url", "image")
"""Content part types that carry an image (Responses, Chat Completions, Anthropic)."""
BINARY_SNIFF_BYTES = 8192
"""How much of a file is looked at for a NUL byte, the mark of a binary file."""


def refuse_image(kind: str, param: str) -> InvalidRequest:
    return InvalidRequest(
        f"This model reads text only: a content part of type '{kind}' cannot be read. Describe "
        "the image in text instead.",
        param=param,
    )


def file_text(part: dict[str, Any], param: str) -> str:
    """The text of an `input_file` part, as the model sees it, or the 400 saying why it has none."""
    name = part.get("filename") if isinstance(part.get("filename"), str) else None
    if part.get("file_id") is not None:
        raise InvalidRequest(
            f"No file has the id {part['file_id']!r}: whiz keeps no uploaded files. Send the "
            "file's contents in file_data instead.",
            param=f"{param}.file_id",
            code="file_not_found",
        )
    if part.get("file_url") is not None:
        raise InvalidRequest(
            "whiz does not fetch files from URLs (the server reaches no network). Send the "
            "file's contents in file_data instead.",
            param=f"{param}.file_url",
        )
    data = part.get("file_data")
    if not isinstance(data, str) or not data:
        raise InvalidRequest(
            "An input_file part needs file_data: the file's contents, base64-encoded.",
            param=f"{param}.file_data",
        )
    raw, media_type = _decode(data, f"{param}.file_data")
    text = _as_text(raw, media_type, name, f"{param}.file_data")
    label = name or "file"
    return f'\n<file name="{label}">\n{text}\n</file>\n'


def _decode(data: str, param: str) -> tuple[bytes, str | None]:
    """The bytes of `file_data`, and the media type a data URL names."""
    media_type = None
    if data.startswith("data:"):
        head, sep, body = data[5:].partition(",")
        if not sep:
            raise InvalidRequest("This data URL has no ',' before its contents.", param=param)
        media_type = head.split(";")[0] or None
        if not head.endswith(";base64"):
            return unquote_to_bytes(body), media_type
        data = body
    try:
        return base64.b64decode(data, validate=True), media_type
    except (binascii.Error, ValueError):
        raise InvalidRequest(
            "file_data must be base64 (or a data: URL holding base64).", param=param
        ) from None


def _as_text(raw: bytes, media_type: str | None, name: str | None, param: str) -> str:
    what = f"'{name}'" if name else "This file"
    binary_type = media_type is not None and media_type.split("/")[0] in ("image", "audio", "video")
    if binary_type or b"\0" in raw[:BINARY_SNIFF_BYTES]:
        kind = f" ({media_type})" if media_type else ""
        raise InvalidRequest(
            f"{what}{kind} is a binary file, and this model reads text only. Send a text file.",
            param=param,
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(
            f"{what} is not UTF-8 text, and this model reads text only. Send a text file.",
            param=param,
        ) from None
