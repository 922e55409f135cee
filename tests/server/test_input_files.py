"""`input_file` parts: a text file is read into the prompt; what a text model cannot read (a binary
file, a URL, an uploaded file's id, an image) is a 400 that names the field."""

import base64

import httpx
import pytest

from whiz.engine.fake import last_user_message


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ask(served, *parts: dict) -> httpx.Response:
    content = [{"type": "input_text", "text": "Read this."}, *parts]
    body = {"model": "fake", "input": [{"type": "message", "role": "user", "content": content}]}
    return httpx.post(f"{served.base_url}/responses", json=body)


def shown(conversation: str) -> str:
    return "shown: " + last_user_message(conversation)


@pytest.mark.parametrize(
    "file_data",
    [
        b64(b"def add(a, b):\n    return a + b\n"),
        "data:text/x-python;base64," + b64(b"def add(a, b):\n    return a + b\n"),
    ],
    ids=["base64", "data-url"],
)
def test_a_text_file_is_read_into_the_prompt(serve_fake, file_data):
    served = serve_fake(script=shown)
    r = ask(served, {"type": "input_file", "filename": "add.py", "file_data": file_data})
    assert r.status_code == 200, r.text
    text = r.json()["output"][0]["content"][0]["text"]
    assert text == 'shown: Read this.\n<file name="add.py">\ndef add(a, b):\n    return a + b\n\n</file>\n'


def test_a_file_in_a_tool_output_is_read_too(serve_fake):
    served = serve_fake(script=lambda c: "ok" if '<file name="out.txt">\nresult 42' in c else "missing")
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = [{"type": "input_file", "filename": "out.txt", "file_data": b64(b"result 42")}]
    body = {
        "model": "fake",
        "input": [call, {"type": "function_call_output", "call_id": "c1", "output": output}],
    }
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert resp["output"][0]["content"][0]["text"] == "ok"


@pytest.mark.parametrize(
    ("part", "param", "says"),
    [
        ({"file_data": b64(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")}, "file_data", "binary file"),
        ({"file_data": "data:image/png;base64," + b64(b"abc")}, "file_data", "image/png"),
        ({"file_data": b64(b"\xff\xfe caf\xe9")}, "file_data", "not UTF-8"),
        ({"file_data": "not base64!"}, "file_data", "base64"),
        ({"file_url": "https://example.com/a.txt"}, "file_url", "reaches no network"),
        ({"file_id": "file-abc"}, "file_id", "keeps no uploaded files"),
        ({}, "file_data", "needs file_data"),
    ],
    ids=["binary", "image-type", "not-utf8", "not-base64", "url", "id", "nothing"],
)
def test_a_file_the_model_cannot_read_is_a_400_naming_the_field(serve_fake, part, param, says):
    served = serve_fake()
    r = ask(served, {"type": "input_file", "filename": "a.bin", **part})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == f"input.0.content.1.{param}"
    assert says in err["message"]


def test_an_image_is_a_400_saying_the_model_reads_text_only(serve_fake):
    served = serve_fake()
    r = ask(served, {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input.0.content.1.type"
    assert "reads text only" in r.json()["error"]["message"]
    chat = httpx.post(
        f"{served.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
    )
    assert chat.status_code == 400 and "reads text only" in chat.json()["error"]["message"]
