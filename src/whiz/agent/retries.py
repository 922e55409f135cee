"""The small-model retry policy: what the agent does after a reply that owed an edit and made none.

A small model asked the same way answers the same way. A reply that wrote the code back
unchanged, wrote back its instructions or the message it answers, or answered in words while the
tests fail, is pushed back (told what is still owed, as a format retry); the policy then shapes
the requests that follow, the way `HealingModel` sits between the agent and its model. The loop
makes a few calls:

    what to send       `request(items)`: the conversation, `retry_from`, temperature, hollow
    after a reply      `replied(at)`, `restore(text)`, `echoed(...)`, `written_back(...)`,
                       `push_back(did)`, `acted()`, `malformed(text)`, `well_formed()`
    reset              `begin_turn(progress)`, `forget()` (after the conversation was compacted)

Each rule is one piece below:

    Redraw             the next request leaves out the replies that owed an edit, adds the latest
                       feedback to the message they answered, and is sampled (RETRY_TEMPERATURE)
    Hollowing          from the HOLLOW_AFTERth write-back in a row, the functions written back are
                       shown without their bodies (`hollow.py`)
    RepeatedMalformed  a malformed reply word for word again is redrawn without the two
    FailingAsIs        code written back before any edit: the tests run on it once, and what they
                       say goes with the push-back and into every redraw
    echo               a reply that only writes back the instructions or the message it answers
    owed_feedback      what the model is told it still owes
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from whiz.agent.config import AgentConfig
from whiz.agent.context.prompt import echoes_instructions, repeats
from whiz.agent.models.hollow import Hollow, hollow
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.agent.tools import Outcome
from whiz.agent.turns import Progress

Items = list[dict[str, Any]]
RunTests = Callable[[], Awaitable[Outcome]]

HOLLOW_AFTER = 2
"""Replies in a row that wrote the code back unchanged before the next request shows the
functions they wrote back without their bodies (`hollow.py`): one such retry shown the code
still gets an edit out of most of the turns that would otherwise end with none."""

RETRY_TEMPERATURE = 0.7
"""For the reply after one that owed an edit and wrote none (or the same code back): at the
session's temperature (0 by default) the same prompt gives nearly the same reply again. Healing
samples its candidates at this temperature too."""


def _said(item: dict[str, Any]) -> str | None:
    """The text of a user message; None for anything else."""
    content = item.get("content")
    return content if item.get("role") == "user" and isinstance(content, str) else None


@dataclass
class Redraw:
    """After replies that owed an edit and made none, the next request is drawn without them.

    A small model copies a reply it can see (the 0.5B wrote the same file back three times, token
    for token, even sampled at 0.7), and two user messages in a row set it echoing its
    instructions. So the request leaves those replies out, adds the latest feedback to the
    message they answered, and is sampled; the agent's `items` keep everything."""

    at: int | None = None
    """Where in the conversation the replies that owed an edit begin; None: the last reply was
    not one."""

    def mark(self, reply_at: int) -> None:
        """The reply beginning at `reply_at` owed an edit (the first of a run of them counts)."""
        if self.at is None:
            self.at = reply_at

    @property
    def temperature(self) -> float | None:
        """The next request's temperature: None (the session's) unless it is a redraw."""
        return None if self.at is None else RETRY_TEMPERATURE

    def items(self, items: Items) -> Items:
        """The conversation for the next request: a copy (adapters may keep it), merged as above."""
        at = self.at
        if at is None or at == 0 or items[at - 1].get("role") != "user":
            return list(items)
        asked, feedback = items[at - 1], items[-1]
        if not isinstance(asked.get("content"), str) or not isinstance(feedback.get("content"), str):
            return list(items)
        return [*items[: at - 1], {**asked, "content": f"{asked['content']}\n\n{feedback['content']}"}]

    def before(self, items: Items, note: str = "") -> Items | None:
        """`ModelRequest.retry_from`: the conversation before the replies that owed an edit, with
        `note` (what the tests said about the code as it is) added to the message they answered:
        a redraw from the task alone wrote the same code back again. None: no redraw."""
        if self.at is None:
            return None
        items = items[: self.at]
        asked = items[-1] if items else {}
        if not note or _said(asked) is None:
            return items
        return [*items[:-1], {**asked, "content": f"{asked['content']}\n\n{note}"}]


@dataclass
class Hollowing:
    """Replies that write the same functions back, seen with their bodies, keep doing so: from
    the `HOLLOW_AFTER`th in a row, the requests show those functions without bodies, and a reply
    that writes one back as `...` gets its body back (`hollow.py`)."""

    written_back: int = 0
    """Replies in a row that wrote the code back unchanged."""
    hollow: Hollow | None = None
    """The functions the next request shows without bodies, while replies write them back."""

    def wrote_back(self, ws: Workspace, paths: list[str], said: list[str], config: AgentConfig) -> None:
        """A reply wrote `paths` back unchanged; `said` is what names the functions to hollow (the
        task and the feedback since, not the code attached to the task, which names them all)."""
        self.written_back += 1
        if self.written_back < HOLLOW_AFTER or config.actions != "text":
            return  # a tool call's old_text must be copied from the file: it needs the bodies
        self.hollow = hollow(ws, paths, said, config.test_cmd or "") or self.hollow

    def clear(self) -> None:
        self.written_back, self.hollow = 0, None

    def hide(self, items: Items) -> Items:
        return items if self.hollow is None else self.hollow.items(items)

    def restore(self, text: str) -> str:
        return text if self.hollow is None else self.hollow.restore(text)

    def note(self) -> str:
        """What the feedback adds while bodies are hidden: which functions to write anew."""
        if self.hollow is None:
            return ""
        names = ", ".join(f"`{n}`" for n in self.hollow.names[:6])
        if len(self.hollow.names) == 1:
            return f" The body of {names} is left out above: write that function anew."
        return f" The bodies of {names} are left out above: write those functions anew."


@dataclass
class RepeatedMalformed:
    """A malformed reply word for word the one it was just told was wrong: at the session's
    temperature the next one would be the same again, so the retry is redrawn without the two."""

    last: str = ""
    at: int = 0
    """The last malformed reply of the turn, and where it begins in the conversation."""

    def seen(self, text: str, reply_at: int) -> int | None:
        """A malformed reply at `reply_at`: where the redraw starts if it repeats the last one,
        else None."""
        again = self.at if text.strip() == self.last else None
        self.last, self.at = text.strip(), reply_at
        return again

    def clear(self) -> None:
        self.last, self.at = "", 0


@dataclass
class FailingAsIs:
    """Code written back unchanged before the turn's first edit: the model took it for done (the
    0.5B wrote a function back unchanged six times, sampled too, told only that the task asks for
    a change). The tests run on it, once a turn, and where they fail their output goes with the
    push-back and into every redraw: the failing assertion is what says what is still wrong."""

    failing: str | None = None
    """The tests' output on the code as it was ("" where they passed; None: not run this turn)."""

    def due(self, config: AgentConfig, *, changed: bool, tests_fail: bool) -> bool:
        return bool(config.test_cmd) and not changed and not tests_fail and self.failing is None

    def ran(self, outcome: Outcome) -> None:
        self.failing = "" if outcome.ok else outcome.text

    def note(self) -> str:
        """What a redraw from the conversation before adds: the failing tests ("" if none)."""
        if not self.failing:
            return ""
        return f"The tests fail on the code as it is now:\n{self.failing}\nChange the code so that they pass."


def echo(text: str, items: Items, reply_at: int) -> str | None:
    """What a reply only writes back instead of acting: the instructions (their examples), or
    the message it answers (`items[reply_at - 1]`); None for a reply of its own."""
    if echoes_instructions(text):
        return "the instructions"
    message = _said(items[reply_at - 1]) if reply_at > 0 else None
    if message is not None and repeats(text, message):
        return "my last message"
    return None


def owed_feedback(task: str, *, changed: bool, tests_fail: bool, failing_as_is: str | None) -> str:
    """What a reply that owed an edit is told is still owed."""
    if tests_fail and failing_as_is and not changed:
        # Each time: the merged retry shows only the latest feedback (`Redraw.items`).
        return f"It is the code the tests failed on:\n{failing_as_is}\nChange it so that they pass."
    if tests_fail:
        return "It is the code the tests failed on: change it so that they pass."
    return f"The task asks for a change, and none is made yet: {task.strip()[:300]}"


@dataclass
class Request:
    """What the retry policy sends next (see `ModelRequest`'s fields of the same names)."""

    items: Items
    retry_from: Items | None
    temperature: float | None
    hollow: Hollow | None


class Retries:
    """The rules above, as the loop calls them over one agent's turns."""

    def __init__(self, ws: Workspace, config: AgentConfig):
        self.ws, self.config = ws, config
        self.redraw = Redraw()
        self.hollowing = Hollowing()
        self.repeated = RepeatedMalformed()
        self.as_is = FailingAsIs()
        self.turn = Progress()
        """The running turn, as the loop keeps it."""
        self.reply_at = 0
        """Where the latest reply begins in the conversation."""

    # -- reset

    def begin_turn(self, turn: Progress) -> None:
        self.turn = turn
        self.redraw.at, self.as_is.failing = None, None
        self.repeated.clear()
        self.hollowing.clear()

    def forget(self) -> None:
        """The conversation was rewritten (compacted): a retry sees it as it is now."""
        self.redraw.at = None
        self.hollowing.clear()

    # -- what to send

    def request(self, items: Items) -> Request:
        note = self.as_is.note() + self.hollowing.note() if self.as_is.failing else ""
        before = self.redraw.before(items, note)
        return Request(
            items=self.hollowing.hide(self.redraw.items(items)),
            retry_from=None if before is None else self.hollowing.hide(before),
            temperature=self.redraw.temperature,
            hollow=self.hollowing.hollow,
        )

    # -- after a reply

    def replied(self, at: int) -> None:
        """The reply just read begins at `at` in the conversation."""
        self.reply_at = at

    def restore(self, text: str) -> str:
        """The reply as meant: a body written as `...` under a hidden header is put back."""
        return self.hollowing.restore(text)

    def echoed(self, items: Items, text: str, owes: Callable[[], bool]) -> tuple[str, str] | None:
        """A reply that only wrote back the instructions or the message it answers (`echo`): what
        it is told (what is still owed where `owes()`, else the task again) and the format error.
        None for a reply of its own. The instructions' READ, LIST and GREP lines are examples:
        acting on them only adds noise, and a message written back is no answer."""
        what = echo(text, items, self.reply_at)
        if what is None:
            return None
        owed = self.feedback() if owes() else f"The task: {self.turn.task.strip()[:300]}"
        self.redraw.mark(self.reply_at)
        return (
            f"Your last reply wrote {what} back instead of acting on it. {owed}",
            f"the reply wrote {what} back",
        )

    async def written_back(
        self,
        items: Items,
        paths: list[str],
        turn_start: int | None,
        run_tests: RunTests,
    ) -> None:
        """The reply wrote the code (`paths`) back unchanged while the turn still owes a change:
        the tests run on it if due (`FailingAsIs`; `run_tests` records whether they fail), and it
        counts toward `Hollowing`."""
        if self.as_is.due(self.config, changed=bool(self.turn.changed), tests_fail=self.turn.tests_fail):
            self.as_is.ran(await run_tests())
        said = [self.turn.task, self.as_is.failing or ""]
        said += [text for i in items[(turn_start or 0) + 1 :] if (text := _said(i)) is not None]
        self.hollowing.wrote_back(self.ws, paths, said, self.config)

    def feedback(self) -> str:
        """What a pushed-back reply is told is still owed."""
        t = self.turn
        owed = owed_feedback(
            t.task, changed=bool(t.changed), tests_fail=t.tests_fail, failing_as_is=self.as_is.failing
        )
        return owed + self.hollowing.note()

    def still_owed(self) -> str:
        """The end of the format error's message for a pushed-back reply."""
        if self.turn.tests_fail:
            return f"and the tests (`{shown(self.config.test_cmd or '')}`) still fail"
        return "and the task asked for a change"

    def push_back(self, did: str) -> tuple[str, str]:
        """The reply owed an edit and made none (it `did` something else): what it is told, and
        the format error. The next request is a redraw (`Redraw`)."""
        self.redraw.mark(self.reply_at)
        return f"Your last reply {did}. {self.feedback()}", f"the reply {did}, {self.still_owed()}"

    def acted(self) -> None:
        """The reply acted: the requests go back to the whole conversation."""
        self.redraw.at = None
        self.hollowing.clear()

    def malformed(self, text: str) -> None:
        """The reply's actions were malformed: redrawn if it repeats the last malformed one."""
        again = self.repeated.seen(text, self.reply_at)
        if again is not None:
            self.redraw.at = again

    def well_formed(self) -> None:
        self.repeated.clear()
