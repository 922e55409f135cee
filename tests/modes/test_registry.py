"""The modes as objects (`whiz.modes.registry`): what each does, read by name, and explained once."""

from __future__ import annotations

import json

import pytest

from whiz.modes.registry import TRIGGERS, Label, Mode, mode_help


def test_each_mode_says_which_model_starts_plans_and_takes_over():
    table = {mode: (mode.first, mode.director, mode.heals) for mode in Mode}
    assert table == {
        Mode.FAST: (Label.FAST, Label.FAST, False),
        Mode.DEEP: (Label.DEEP, Label.DEEP, False),
        Mode.AUTO: (Label.FAST, Label.DEEP, True),
    }
    assert all(Mode.AUTO.escalates(trigger) for trigger in TRIGGERS)
    assert not any(mode.escalates(trigger) for mode in (Mode.FAST, Mode.DEEP) for trigger in TRIGGERS)
    assert not Mode.AUTO.escalates("a trigger no one fires")


def test_a_mode_reads_stores_and_prints_as_its_name():
    assert Mode.named("auto") is Mode.AUTO and Mode.named(Mode.DEEP) is Mode.DEEP
    with pytest.raises(ValueError, match="the mode must be fast, deep or auto, not 'turbo'"):
        Mode.named("turbo")
    assert json.dumps({"mode": Mode.AUTO, "to": Label.DEEP}) == '{"mode": "auto", "to": "deep"}'
    assert f"{Mode.FAST} mode" == "fast mode" and Mode.DEEP == "deep"
    # A stored session's mode: one of today's, or none.
    assert Mode.read("deep") is Mode.DEEP and Mode.read("turbo") is None and Mode.read(None) is None


def test_the_help_is_written_once_for_the_ui_and_the_command_line():
    assert Mode.DEEP.help("qwen2.5-coder-1.5b at http://gpu:8000") == (
        "the deep model answers: qwen2.5-coder-1.5b at http://gpu:8000"
    )
    auto = Mode.AUTO.help()
    assert auto.startswith("deep first for a change of behaviour or a new program, fast first for a rename")
    assert "deep when a run of the tests or the check fails, an edit fails to apply twice" in auto
    assert all(words in auto for words in TRIGGERS.values())  # every trigger, and only from here
    text = mode_help()
    assert text.startswith("fast, deep or auto.")
    assert all(f"{mode}: {mode.help()}" in text for mode in Mode)
