"""`/infill` and `/v1/completions` over HTTP, on the fake FIM model: the shapes editor plugins read."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.conftest import ServerThread
from whiz.commands.serve import build_app
from whiz.completion.fake import fim_fake_engine, knows
from whiz.config import ServeSettings
from whiz.engine.fake import fake_engine
from whiz.gateway.local import free_port

DOC = (
    "import math\n\n\n"
    "def area(r):\n"
    '    """The area of a circle of radius r."""\n'
    "    return math.pi * r * r\n\n\n"
    "def main():\n"
    "    print(area(2))\n"
)
CURSOR = DOC.index("return math.pi") + len("return ")
LINE_START = DOC.rindex("\n", 0, CURSOR) + 1
LINE_END = DOC.index("\n", CURSOR)
EXPECTED = "math.pi * r * r"


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Start a server on an engine: `serve(engine=None, **settings)` -> its root URL."""
    started = []

    def start(engine=None, **settings) -> str:
        engine = engine or fim_fake_engine(knows(DOC))
        app = build_app(engine, ServeSettings(model="fake", engine_only=True, **settings))
        server = ServerThread(app, free_port())
        server.start()
        started.append((server, engine))
        return f"http://127.0.0.1:{server.server.config.port}"

    yield start
    for server, engine in started:
        server.stop()
        engine.close()


def llama_vim_body(**extra) -> dict:
    """A request shaped as llama.vim sends it: lines before, the cursor's line, the rest."""
    return {
        "input_prefix": DOC[:LINE_START],
        "prompt": DOC[LINE_START:CURSOR],
        "input_suffix": DOC[LINE_END:],  # the rest of the line is what is being written
        "input_extra": [{"text": "def helper():\n    pass\n", "time": 1, "filename": "util.py"}],
        "n_predict": 64,
        "n_indent": 4,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 1000,
        **extra,
    }


def sse(response: httpx.Response) -> list:
    return [
        json.loads(line[6:]) if line != "data: [DONE]" else "[DONE]"
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def test_infill_answers_as_llama_cpp_server_does(serve):
    root = serve()
    out = httpx.post(f"{root}/infill", json=llama_vim_body(), timeout=30).json()
    assert out["content"] == EXPECTED
    assert out["stop"] is True and out["stop_type"] == "eos" and out["truncated"] is False
    assert out["tokens_cached"] > 0 and out["tokens_evaluated"] > len(DOC) // 2
    assert {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"} <= set(
        out["timings"]
    )


def test_infill_response_fields_pick_paths_as_llama_vim_asks(serve):
    root = serve()
    fields = ["content", "timings/prompt_n", "timings/predicted_ms", "truncated", "tokens_cached"]
    out = httpx.post(f"{root}/infill", json=llama_vim_body(response_fields=fields), timeout=30).json()
    assert set(out) == set(fields) and out["content"] == EXPECTED


def test_infill_streams_content_then_a_final_stop_chunk(serve):
    root = serve()
    body = llama_vim_body(stream=True, input_prefix=DOC[: DOC.index("def area")], prompt="", n_indent=0)
    del body["t_max_predict_ms"]
    body["n_predict"] = 256
    body["input_suffix"] = DOC[DOC.index("\n\n\ndef main") :]
    response = httpx.post(f"{root}/infill", json=body, timeout=30)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response)
    assert all(not e["stop"] for e in events[:-1]) and events[-1]["stop"] is True
    streamed = "".join(e["content"] for e in events)
    assert streamed == DOC[DOC.index("def area") : DOC.index("\n\n\ndef main")]
    assert len(events) > 2  # the block came line by line, not in one piece at the end


def test_v1_completions_with_a_suffix_through_the_openai_sdk(serve):
    root = serve()
    client = openai.OpenAI(base_url=f"{root}/v1", api_key="none")
    out = client.completions.create(model="whiz", prompt=DOC[:CURSOR], suffix=DOC[LINE_END:], max_tokens=32)
    assert out.object == "text_completion" and out.choices[0].text == EXPECTED
    assert out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens > 0 and out.usage.prompt_tokens > out.usage.completion_tokens


def test_v1_completions_streams_chunks_usage_and_done(serve):
    root = serve()
    body = {
        "prompt": DOC[:CURSOR],
        "suffix": DOC[LINE_END:],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = sse(httpx.post(f"{root}/v1/completions", json=body, timeout=30))
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    assert "".join(e["choices"][0]["text"] for e in events[:-2]) == EXPECTED
    assert events[-3]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_a_newer_request_of_the_same_client_answers_the_older_with_nothing(serve, stream):
    engine = fim_fake_engine(knows(DOC), step_s=0.05)
    root = serve(engine)
    body = {"prompt": DOC[:CURSOR], "suffix": DOC[LINE_END:], "stream": stream}
    headers = {"X-Whiz-Client": "editor-1"}
    with ThreadPoolExecutor(1) as pool:
        old = pool.submit(httpx.post, f"{root}/v1/completions", json=body, headers=headers, timeout=30)
        deadline = time.monotonic() + 20
        while engine.status()["active"] == 0 and not old.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        newer = httpx.post(
            f"{root}/v1/completions",
            json={**body, "prompt": DOC[: CURSOR + 4], "stream": False},
            headers=headers,
        )
        old_response = old.result()
    assert newer.json()["choices"][0]["text"] == EXPECTED[4:]
    if stream:
        chunks = [e for e in sse(old_response) if e != "[DONE]"]
        assert "".join(e["choices"][0]["text"] for e in chunks) == ""
        assert chunks[-1]["choices"][0]["finish_reason"] == "cancelled"
    else:
        choice = old_response.json()["choices"][0]
        assert (choice["text"], choice["finish_reason"]) == ("", "cancelled")


def test_other_clients_are_not_cancelled(serve):
    engine = fim_fake_engine(knows(DOC), step_s=0.02)
    root = serve(engine)
    body = {"prompt": DOC[:CURSOR], "suffix": DOC[LINE_END:]}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            httpx.post, f"{root}/v1/completions", json=body, headers={"X-Whiz-Client": "a"}, timeout=30
        )
        while engine.status()["active"] == 0 and not first.done():
            time.sleep(0.01)
        second = httpx.post(f"{root}/v1/completions", json=body, headers={"X-Whiz-Client": "b"}, timeout=30)
        assert first.result().json()["choices"][0]["text"] == second.json()["choices"][0]["text"] == EXPECTED


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"suffix": "x"}, "prompt"),
        ("/v1/completions", {"prompt": 3}, "prompt"),
        ("/v1/completions", {"prompt": ["a", "b"]}, "prompt"),
        ("/v1/completions", {"prompt": "a", "max_tokens": "many"}, "max_tokens"),
        ("/v1/completions", {"prompt": "a", "echo": True}, "echo"),
        ("/v1/completions", {"prompt": "a", "n": 2}, "n"),
        ("/v1/completions", {"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ("/infill", {"input_prefix": 1}, "input_prefix"),
        ("/infill", {"input_extra": [{"filename": "a.py"}]}, "input_extra.0.text"),
        ("/infill", {"input_extra": "a.py"}, "input_extra"),
        ("/infill", {"n_predict": -5}, "n_predict"),
        ("/infill", {"stop": ["x" * 65]}, "stop"),
        ("/infill", {"prompt": [1, 2, 3]}, "prompt"),
    ],
)
def test_bad_requests_get_a_400_naming_the_field(serve, path, body, param):
    root = serve()
    response = httpx.post(f"{root}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_a_body_over_the_limit_gets_a_413(serve):
    root = serve(max_body_mb=0.01)
    body = {"input_prefix": "x = 1\n" * 5000, "input_suffix": ""}
    response = httpx.post(f"{root}/infill", json=body, timeout=30)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"


def test_a_model_without_fim_tokens_gets_a_clear_400(serve):
    root = serve(fake_engine())
    for path, body in [
        ("/infill", {"input_prefix": "x = ", "input_suffix": ""}),
        ("/v1/completions", {"prompt": "x = ", "suffix": ""}),
    ]:
        response = httpx.post(f"{root}{path}", json=body, timeout=30)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "fim_unsupported" and "fill-in-the-middle" in error["message"]
    plain = httpx.post(f"{root}/v1/completions", json={"prompt": "x = "}, timeout=30)
    assert plain.status_code == 200  # a prompt without a suffix needs no FIM tokens


def test_completions_need_the_api_key(serve):
    root = serve(api_keys=["sk-1"])
    body = {"input_prefix": DOC[:CURSOR], "input_suffix": DOC[LINE_END:]}
    assert httpx.post(f"{root}/infill", json=body, timeout=30).status_code == 401
    ok = httpx.post(f"{root}/infill", json=body, headers={"Authorization": "Bearer sk-1"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["content"] == EXPECTED


@pytest.mark.model
def test_the_real_model_completes_a_function_body(real_server):
    source = (
        "import math\n\n\n"
        "def add(a, b):\n"
        '    """Return the sum of a and b."""\n'
        "    {cursor}\n\n\n"
        "def mul(a, b):\n"
        '    """Return the product of a and b."""\n'
        "    return a * b\n"
    )
    before, after = source.split("{cursor}")
    body = {"input_prefix": before, "input_suffix": after, "n_predict": 24, "id_slot": 7}
    out = httpx.post(f"{real_server.root}/infill", json=body, timeout=120).json()
    code = out["content"]
    assert code.startswith("return") and "a + b" in code.replace("b + a", "a + b"), code
    assert "a * b" not in code and "def mul" not in code  # it stops at the block, repeats nothing
