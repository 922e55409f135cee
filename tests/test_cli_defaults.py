"""`whiz heal` and `whiz swarm` take their settings as flags whose defaults are written in
`whiz.commands.agent_options` (`HealOptions`, `SwarmOptions`), beside the library's settings
objects: each must show the default the library's object (`HealSettings`, `SwarmSettings`) has, or
`--help` would tell a user one number while a library caller runs with another."""

from __future__ import annotations

import dataclasses

import pytest
import typer

from whiz.cli import app
from whiz.modes.healing import HealSettings
from whiz.modes.swarm import SwarmSettings

# (command, settings class, {option's name: the field it sets, and how})
COMMANDS = [
    (
        "heal",
        HealSettings,
        {
            "n": ("n", lambda v: v),
            "temperature": ("temperature", lambda v: v),
            "rounds": ("rounds", lambda v: v),
            "test_timeout": ("test_timeout_s", lambda v: v),
            "seed": ("seed", lambda v: v),
            "sequential": ("parallel", lambda v: not v),
            "all_": ("first_pass", lambda v: not v),
            "allow_test_edits": ("allow_test_edits", lambda v: v),
            "budget": ("budget_s", lambda v: v or None),
        },
    ),
    (
        "swarm",
        SwarmSettings,
        {
            "workers": ("workers", lambda v: v),
            "retries": ("retries", lambda v: v),
            "check_timeout": ("check_timeout_s", lambda v: v),
            "test_cmd": ("test_cmd", lambda v: v),
        },
    ),
]


@pytest.mark.parametrize(("command", "settings", "fields"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_flag_defaults_to_what_its_setting_defaults_to(command, settings, fields):
    params = {p.name: p for p in typer.main.get_command(app).commands[command].params}
    defaults = {f.name: f.default for f in dataclasses.fields(settings)}
    for option, (field, as_setting) in fields.items():
        assert as_setting(params[option].default) == defaults[field], f"whiz {command}: {option}"
