"""A settings model's fields as a command's options: `whiz serve` takes `--<name>` for each field of
`ServeSettings`, with the field's description for help and the field's default for default, so the
command line, the settings and docs/configuration.md cannot disagree.

An option left off the command line is not passed on, so the settings' other layers (a config
file, the environment) keep their say; `whiz.config.load_settings` merges them. The options are
made when the command is first parsed or its help shown: they need pydantic and the settings
model, which every other command would otherwise import at start for nothing (a few hundred ms on
a 2-core machine).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

SCALARS = (bool, int, float, str, Path)


def components(model: type[BaseModel]) -> list[tuple[type[BaseModel], list[str]]]:
    """The parts `model` is composed of, in the order it names its bases, each with the fields it
    declares (just `model` and all its fields when it is not composed). A field a part declares
    again, for another default, stays with the part that first declared it."""
    owner: dict[str, type[BaseModel]] = {}
    for cls in reversed(model.__mro__):
        for n in inspect.get_annotations(cls):
            if n in model.model_fields:
                owner.setdefault(n, cls)
    return [
        (cls, own)
        for cls in model.__mro__
        if (own := [n for n in inspect.get_annotations(cls) if owner.get(n) is cls])
    ]


def option_type(name: str, field: FieldInfo) -> Any:
    """The type the command line reads a setting as (a list: repeated); pydantic checks the rest
    (ranges, choices, an upstream's URL) as it does for the other layers."""
    hint = field.annotation
    if get_origin(hint) in (Union, UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    if get_origin(hint) is Literal:
        return str
    if get_origin(hint) is list:
        (items,) = get_args(hint)
        if str in (items, *get_args(items)):  # list[str | UpstreamSpec]: the flag gives a URL
            return list[str]
        if items in SCALARS:
            return hint
    elif hint in SCALARS:
        return hint
    raise TypeError(f"setting {name!r}: option_type has no command-line form for {hint!r}")


def flag_names(name: str, field: FieldInfo) -> list[str]:
    """A setting's flag, as typer declares it: `--<name>` (`--<name>/--no-<name>` for a switch that
    is on unless turned off), or what the field's `Flag` says, then its older spellings."""
    flag = flag_of(field)
    main = flag.name or "--" + name.replace("_", "-")
    if (
        option_type(name, field) is bool and field.default and "/" not in main
    ):  # a switch that is on: how to turn it off
        main = f"{main}/--no-{main.removeprefix('--')}"
    return [main, *flag.also]


def flag_of(field: FieldInfo) -> Any:
    """The field's `Flag` (a plain one where it has none)."""
    from whiz.flag import Flag

    return next((m for m in field.metadata if isinstance(m, Flag)), Flag())


def option(name: str, field: FieldInfo, panel: str | None = None) -> inspect.Parameter:
    """The setting `name` as a typer option whose default is the setting's (so help shows it),
    listed under `panel` in rich help."""
    kind = option_type(name, field)
    listed = get_origin(kind) is list
    flag = flag_of(field)
    help_text = (field.description or "") + (" Repeat the flag for more." if listed else "")
    default = field.get_default(call_default_factory=True)
    declared = typer.Option(
        *flag_names(name, field),
        help=help_text,
        rich_help_panel=panel or None,
        envvar=flag.env,
        metavar=flag.metavar,
        show_default=flag.shown if default is None and flag.shown else True,
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[kind | None, declared],
        default=None if default == [] else default,
    )


def complaint(model: type[BaseModel], exc: Any) -> str:
    """A settings model's ValidationError as one line in the words of the command line: the flag,
    then what is wrong with its value ("-n must be between 1 and 16, not 0")."""
    error = exc.errors()[0]
    message = error["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
    message = re.sub(r"^the \w+ (?=must)", "", message.replace("greater than or equal to", "at least"))
    if error["type"] == "literal_error":
        message = f"must be {error['ctx']['expected'].replace(chr(39), '')}"
    if not error["loc"]:
        return message
    name = str(error["loc"][0])
    flag = flag_names(name, model.model_fields[name])[0].split("/")[0]
    if not message.startswith("must"):
        return f"{flag}: {message}"
    shown = error.get("input")
    return f"{flag} {message}" + ("" if "not " in message or shown is None else f", not {shown!r}")


def settings_command(
    app: typer.Typer, settings: str, *, name: str | None = None, **command_settings: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as a command of `app` with, besides its own parameters, an
    option per field of the settings model `settings` ("module:Class"). A function with an
    `options` parameter takes the settings made from every option (given, from its environment
    variable, or the default), checked: bad input ends the command with one line naming the flag.
    One with `flags` takes only those given on the command line, a dict by field name (left out:
    not given), for the settings' other layers (a config file, the environment) to fill.

    typer makes a command's options from its function's signature, so the command is made twice:
    now from the function's own parameters (cheap, for the list of commands), and again with the
    settings' options when it is first parsed or its help shown (`_MadeOnUse`).
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(command)
        checked = "options" in own.parameters
        # The settings' own parameter is typed for readers only (its class is imported on use).
        params = [
            _evaluated(p, command) for p in own.parameters.values() if p.name not in ("flags", "options")
        ]

        def make() -> Any:
            module, _, cls = settings.partition(":")
            model = getattr(importlib.import_module(module), cls)
            options = [
                option(n, model.model_fields[n], part.model_config.get("title"))
                for part, names in components(model)
                for n in names
            ]
            clash = {p.name for p in params} & {"context", *(o.name for o in options)}
            if clash:
                raise TypeError(f"{command.__name__}'s parameters {sorted(clash)} clash with its settings'")

            def run(context: typer.Context, **kwargs: Any) -> Any:
                values = {o.name: kwargs.pop(o.name) for o in options}
                if checked:
                    return command(**kwargs, options=_checked(model, values))
                given = {k: v for k, v in values.items() if _from_command_line(context, k)}
                return command(**kwargs, flags=given)

            ctx = inspect.Parameter("context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
            return _typer_command(run, command, own.replace(parameters=[*params, *options, ctx]))

        made = {"make": staticmethod(make), "settings": settings}
        cls = type(f"{command.__name__}_command", (_MadeOnUse,), made)
        shell = _with_signature(lambda **kwargs: None, command, own.replace(parameters=params))
        app.command(name, cls=cls, **command_settings)(shell)
        return command

    return decorate


class _MadeOnUse(TyperCommand):
    """A typer command whose parameters and callback come from `make()`, called the first time
    either is needed: when the command is parsed or its help shown, never for another command."""

    make: Callable[[], Any]
    settings: str
    """The settings model the options come from ("module:Class")."""

    @functools.cached_property
    def _made(self) -> Any:
        return self.make()

    # typer and click set both in __init__ from the function's own parameters; `make` has those too.
    params = property(lambda self: self._made.params, lambda self, value: None)
    callback = property(lambda self: self._made.callback, lambda self, value: None)


def _evaluated(param: inspect.Parameter, command: Callable[..., Any]) -> inspect.Parameter:
    """`param` with its annotation evaluated, as typer needs it (`from __future__ import annotations`)."""
    if not isinstance(param.annotation, str):
        return param
    return param.replace(annotation=eval(param.annotation, command.__globals__))  # noqa: S307


def _checked(model: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    """The settings the options' values make; bad ones end the command with one line."""
    from pydantic import ValidationError

    from whiz.commands.flags import fail

    try:
        return model.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise fail(complaint(model, exc)) from None
    except ValueError as exc:  # a setting's own reading, such as the config file's [sandbox] table
        raise fail(str(exc)) from None


def _from_command_line(context: typer.Context, name: str) -> bool:
    """Whether the option `name` was given, not left at its default (the other layers' turn)."""
    source = context.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _with_signature(fn: Callable[..., Any], like: Callable[..., Any], signature: inspect.Signature):
    """`fn` named and documented as `like`, with `signature` for typer to read."""
    functools.update_wrapper(fn, like)
    del fn.__wrapped__  # typer reads __signature__, not the wrapped function's
    fn.__signature__ = signature  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return fn


def _typer_command(run: Callable[..., Any], like: Callable[..., Any], signature: inspect.Signature) -> Any:
    """The click command typer makes of `run` with `signature`."""
    one = typer.Typer(add_completion=False)
    one.command()(_with_signature(run, like, signature))
    return typer.main.get_command(one)


def settings_model(command: Any) -> type[BaseModel] | None:
    """The settings model a click command's options come from (None: a command declared by hand)."""
    if not isinstance(command, _MadeOnUse):
        return None
    module, _, cls = command.settings.partition(":")
    return getattr(importlib.import_module(module), cls)
