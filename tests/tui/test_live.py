"""Live TTFT and tokens/s: estimated while the reply streams, the server's figures once it ends."""

from __future__ import annotations

from whiz.tui.live import LiveStats


def test_ttft_counts_from_when_the_agent_started_waiting():
    stats = LiveStats()
    stats.waiting(now=10.0)
    stats.text("def ", now=10.25)
    assert stats.describe() == "ttft ~250 ms"


def test_speed_is_estimated_from_the_text_after_a_moment():
    stats = LiveStats()
    stats.waiting(now=0.0)
    stats.text("x" * 4, now=1.0)
    stats.text("x" * 36, now=1.1)
    assert stats.tokens_per_s is None  # too early to say
    stats.text("x" * 40, now=2.0)
    assert stats.describe() == "ttft ~1000 ms · ~20.0 tok/s"  # 80 chars ≈ 20 tokens in 1 s


def test_the_servers_figures_replace_the_estimate():
    stats = LiveStats()
    stats.waiting(now=0.0)
    stats.text("x" * 400, now=0.5)
    stats.text("x" * 400, now=1.5)
    stats.finished({"ttft_ms": 88.4, "decode_tokens": 120, "decode_ms": 3000.0})
    assert stats.describe() == "ttft 88 ms · 40.0 tok/s"
    stats.finished({"ttft_ms": 50.0, "tokens_per_s": 31.5})
    assert stats.describe() == "ttft 50 ms · 31.5 tok/s"


def test_a_new_reply_starts_a_new_estimate():
    stats = LiveStats()
    stats.waiting(now=0.0)
    stats.text("x" * 100, now=0.1)
    stats.finished({"ttft_ms": 100.0, "tokens_per_s": 30.0})
    stats.waiting(now=5.0)
    stats.text("y", now=5.5)
    assert stats.describe() == "ttft ~500 ms"
