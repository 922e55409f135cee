"""MCP calls in text actions: `CALL name {json}`, and the forms a small model writes instead."""

from __future__ import annotations

from whiz.agent.formats import text_actions
from whiz.agent.tools import CallTool, Malformed, ReadFile, RunCommand


def test_a_call_line_with_json_arguments() -> None:
    assert text_actions('CALL notes__read_note {"name": "shop"}') == [
        CallTool("notes__read_note", {"name": "shop"})
    ]
    assert text_actions("CALL notes__crash") == [CallTool("notes__crash", {})]


def test_words_instead_of_json_are_kept_for_the_toolbox() -> None:
    assert text_actions("CALL notes__read_note shop") == [CallTool("notes__read_note", {}, plain="shop")]


def test_bad_json_is_malformed() -> None:
    [action] = text_actions("CALL notes__read_note {name: shop}")
    assert isinstance(action, Malformed) and "not valid JSON" in action.message


def test_a_call_without_its_verb_or_inside_another_verbs_line_is_a_call() -> None:
    text = (
        'READ README.md\nREAD README.md notes__read_note {"name": "shop"}\n'
        'notes__write_note {"name": "a", "text": "b"}'
    )
    assert text_actions(text) == [
        ReadFile("README.md"),
        CallTool("notes__read_note", {"name": "shop"}),
        CallTool("notes__write_note", {"name": "a", "text": "b"}),
    ]


def test_ordinary_lines_stay_what_they_were() -> None:
    # A command with JSON in it but no server__tool name, and a dunder name in prose, are not calls.
    assert text_actions("RUN echo '{\"a\": 1}'") == [RunCommand("echo '{\"a\": 1}'")]
    assert text_actions("The __init__ {x} method is fine.") == []
    assert text_actions('```\nnotes__read_note {"name": "shop"}\n```') == []
