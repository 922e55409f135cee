import pytest

from whiz.client import api_base, responses_ws_url


@pytest.mark.parametrize(
    ("given", "ws"),
    [
        ("http://127.0.0.1:8321", "ws://127.0.0.1:8321/v1/responses"),
        ("http://127.0.0.1:8321/", "ws://127.0.0.1:8321/v1/responses"),
        ("http://127.0.0.1:8321/v1", "ws://127.0.0.1:8321/v1/responses"),
        ("http://127.0.0.1:8321/v1/responses", "ws://127.0.0.1:8321/v1/responses"),
        ("https://example.com/v1/", "wss://example.com/v1/responses"),
        ("localhost:9000", "ws://localhost:9000/v1/responses"),
    ],
)
def test_base_urls_map_to_the_websocket_endpoint(given, ws):
    assert responses_ws_url(given) == ws


def test_the_api_base_ends_in_v1():
    assert api_base("ws://h:1/v1/chat/completions") == "http://h:1/v1"


def test_an_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="scheme"):
        api_base("ftp://h/v1")
