"""Safe binds: no open server by accident, Host and Origin checked on every route, keys kept secret."""

from __future__ import annotations

import io
import socket

import httpx
import pytest
from rich.console import Console

from whiz.backend.engine import EngineBackend
from whiz.commands.serve import _print_urls, check_bind
from whiz.config import ServeSettings
from whiz.engine.fake import fake_engine
from whiz.errors import Forbidden, InvalidRequest
from whiz.server.auth import KeyCheck, RateLimiter
from whiz.server.state import ServerState

from .test_errors import GOOD_CHAT, assert_error, assert_still_serves


def test_a_public_bind_without_a_key_refuses_to_start():
    with pytest.raises(InvalidRequest, match="--api-key") as refused:
        check_bind(ServeSettings(host="0.0.0.0"))
    assert "--insecure-no-auth" in refused.value.message
    check_bind(ServeSettings(host="0.0.0.0", api_keys=["k"]))
    check_bind(ServeSettings(host="0.0.0.0", insecure_no_auth=True))
    check_bind(ServeSettings(host="127.0.0.1"))
    check_bind(ServeSettings(host="::1"))


def test_the_banner_never_prints_a_key():
    out = io.StringIO()
    _print_urls(ServeSettings(api_keys=["sk-secret-123"]), Console(file=out, width=300))
    assert "sk-secret-123" not in out.getvalue()
    assert "Authorization: Bearer $WHIZ_KEY" in out.getvalue()


def test_other_hosts_are_refused_on_every_route(serve_fake):
    served = serve_fake(allowed_hosts=["box.lan"])
    for path in ("/v1/models", "/health", "/metrics"):
        r = httpx.get(f"{served.root}{path}", headers={"Host": "evil.example"})
        assert_error(r, 403, "host_not_allowed")
    r = httpx.post(f"{served.base_url}/chat/completions", json=GOOD_CHAT, headers={"Host": "rebind.evil"})
    assert_error(r, 403, "host_not_allowed")
    assert httpx.get(f"{served.base_url}/models", headers={"Host": "box.lan:8321"}).status_code == 200
    assert httpx.get(f"{served.base_url}/models", headers={"Host": "localhost"}).status_code == 200


def test_a_network_bind_answers_at_its_addresses_and_its_name_only():
    engine = fake_engine()
    try:
        settings = ServeSettings(host="0.0.0.0", api_keys=["k"])
        guard = ServerState(EngineBackend(engine), settings).browser
        for host in ("10.1.2.3:8321", "[fe80::1]:8321", f"{socket.gethostname()}:8321", "localhost"):
            guard.check({"host": host})
        with pytest.raises(Forbidden):
            guard.check({"host": "attacker.example:8321"})  # a rebound name
    finally:
        engine.close()


def test_a_web_page_of_another_origin_cannot_spend_compute(serve_fake):
    served = serve_fake(allowed_origins=["https://tool.example"])
    url = f"{served.base_url}/chat/completions"
    assert_error(
        httpx.post(url, json=GOOD_CHAT, headers={"Origin": "https://evil.example"}), 403, "origin_not_allowed"
    )
    assert_error(httpx.post(url, json=GOOD_CHAT, headers={"Origin": "null"}), 403, "origin_not_allowed")
    assert httpx.post(url, json=GOOD_CHAT, headers={"Origin": "https://tool.example"}).status_code == 200
    assert httpx.post(url, json=GOOD_CHAT, headers={"Origin": served.root}).status_code == 200  # its own page
    assert_still_serves(served)  # programs send no Origin


def test_keys_are_checked_without_a_set_lookup():
    keys = KeyCheck(["alpha", "beta"])
    assert keys.valid("alpha") and keys.valid("beta")
    assert not keys.valid("alph") and not keys.valid("alphaa") and not keys.valid("")
    assert not keys.valid("\ud800")  # a lone surrogate is a wrong key, not a crash
    assert keys.tenant("alpha") != keys.tenant("beta")
    assert KeyCheck([]).tenant("anything") is None  # without keys, one tenant


def test_the_rate_limiter_forgets_the_oldest_buckets():
    limiter = RateLimiter(rpm=1, clock=lambda: 0.0, max_keys=100)
    for i in range(1000):
        limiter.hit(f"addr:{i}")
    assert len(limiter._buckets) == 100
    limiter.hit("addr:0")  # forgotten: a fresh bucket, no harm
