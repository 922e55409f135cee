"""The modes, and the two models they choose between: one registry, so that what a mode does and
how it is explained are written once.

    fast   the fast model answers
    deep   the deep model answers
    auto   deep first for a change of behaviour or a new program, fast first for a rename or
           another mechanical edit (`Behaviour.deep_for`, read by `agent.intent.change_kind`);
           deep when one of its escalation triggers fires (`TRIGGERS`); fast alone, with one
           notice, where the deep model cannot be had

A `Mode` and a `Label` are str enums: they print, store and compare as their names, so the
command line, stored sessions and events read them as before. Code asks a mode what it does
(`first`, `director`, `escalates(trigger)`, `heals`, `help`) rather than comparing it to a name,
and `Mode.named` reads one from the command line, the UI or a stored session.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Label(StrEnum):
    """One of a session's two models: the fast one (the default 0.5B, or `--base-url`'s) or the
    deep one (the 1.5B started in this process, or `--deep-base-url`'s)."""

    FAST = "fast"
    DEEP = "deep"


TRIGGERS: dict[str, str] = {
    "tests_failed": "a run of the tests or the check fails",
    "edit_failures": "an edit fails to apply twice",
    "budget": "a turn runs over its budget",
    "healing": "healing finds no passing candidate",
    "swarm_retry": "a swarm's micro-task fails its retries",
}
"""What can move a turn to the deep model, each with the words that say so (the `trigger` of a
`mode_change` item)."""

DEEP_BY_DEFAULT = (
    "the 1.5B with the 0.5B drafting, started in the background on first use (or in this process "
    "with --in-process), or --deep-base-url's"
)
"""Where the deep model is when nothing says otherwise (the UI names the one it has)."""


@dataclass(frozen=True)
class Behaviour:
    """What a mode does."""

    first: Label
    """The model each turn (and each swarm worker) starts with."""
    director: Label
    """The model that plans a swarm."""
    triggers: tuple[str, ...] = ()
    """What moves the rest of a turn to the deep model (`TRIGGERS`); none: the model stays."""
    deep_for: frozenset[str] = frozenset()
    """The kinds of task (`agent.intent.change_kind`: "behaviour", "mechanical") whose turns start
    with the deep model; any other turn starts with `first`."""
    falls_back: bool = False
    """Where the deep model cannot be had (not installed, would not start), the fast model answers
    instead, said once; otherwise a turn that needs the deep model fails with the reason."""
    heals: bool = False
    """With a test command (and text actions), the agent's steps heal by default, as a ladder
    (cheapest first, one candidate after another; `session.ladder`)."""
    help: str = ""
    """What the mode does, in one line; `{deep}` is where the deep model is, `{triggers}` what
    moves a turn to it."""


class Mode(StrEnum):
    """How a session picks the model that answers; `does` is what the mode does."""

    does: Behaviour

    def __new__(cls, name: str, does: Behaviour) -> Mode:
        mode = str.__new__(cls, name)
        mode._value_, mode.does = name, does
        return mode

    FAST = (
        "fast",
        Behaviour(
            first=Label.FAST,
            director=Label.FAST,
            help="the fast model answers (the default 0.5B, or --base-url's)",
        ),
    )
    DEEP = (
        "deep",
        Behaviour(
            first=Label.DEEP,
            director=Label.DEEP,
            help="the deep model answers: {deep}",
        ),
    )
    AUTO = (
        "auto",
        Behaviour(
            first=Label.FAST,
            director=Label.DEEP,
            triggers=tuple(TRIGGERS),
            deep_for=frozenset({"behaviour"}),
            falls_back=True,
            heals=True,
            help="deep first for a change of behaviour or a new program, fast first for a rename "
            "or another mechanical edit; deep when {triggers}; fast alone where the deep model is "
            "not installed",
        ),
    )

    @classmethod
    def named(cls, name: str) -> Mode:
        """The mode called `name`; ValueError naming the choices otherwise."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"the mode must be {_choices()}, not {name!r}") from None

    @classmethod
    def read(cls, value: object) -> Mode | None:
        """The mode a stored session names; None where it names none (or no mode of today's)."""
        return cls(value) if isinstance(value, str) and value in cls._value2member_map_ else None

    @property
    def first(self) -> Label:
        return self.does.first

    @property
    def director(self) -> Label:
        return self.does.director

    @property
    def heals(self) -> bool:
        return self.does.heals

    @property
    def falls_back(self) -> bool:
        return self.does.falls_back

    def first_for(self, task: str) -> tuple[Label, str]:
        """The model a turn on `task` starts with, and why, in words."""
        # Here, not at the top: the command line reads this module for its help, and `whiz serve`
        # loads no agent module.
        from whiz.agent.intent import change_kind

        kind = change_kind(task)
        if kind in self.does.deep_for:
            return Label.DEEP, f"{self} mode starts a change of {kind} with the deep model"
        if self.does.deep_for and self.does.first == Label.FAST:
            what = f"a {kind} edit" if kind else "a task that asks for no change"
            return Label.FAST, f"{self} mode starts {what} with the fast model"
        return self.does.first, f"{self} mode's model"

    def escalates(self, trigger: str) -> bool:
        """Whether `trigger` moves the rest of the turn to the deep model in this mode."""
        return trigger in self.does.triggers

    def help(self, deep: str = DEEP_BY_DEFAULT) -> str:
        """What the mode does, in one line; `deep` says where the deep model is."""
        phrases = [TRIGGERS[t] for t in self.does.triggers]
        said = ", ".join(phrases[:-1]) + " or " + phrases[-1] if len(phrases) > 1 else "".join(phrases)
        return self.does.help.format(deep=deep, triggers=said)


def _choices() -> str:
    names = [str(mode) for mode in Mode]
    return ", ".join(names[:-1]) + " or " + names[-1]


def mode_help() -> str:
    """The `--mode` option's help: every mode and what it does."""
    modes = "; ".join(f"{mode}: {mode.help()}" for mode in Mode)
    return f"{_choices()}. {modes}. Every switch is shown with its reason."
