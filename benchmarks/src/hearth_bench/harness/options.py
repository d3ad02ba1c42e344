"""A benchmark's parameters, declared once: a frozen dataclass its module owns, from which the
``hearth bench <name>`` command is derived (``hearth_bench.commands``).

A bench module declares::

    @dataclass(frozen=True)
    class PushBench:
        \"\"\"Report-to-websocket latency at each subscriber, against ... (the command's help).\"\"\"

        clients: int = option(1000, "Websocket subscribers of the home")
        duration_s: float = option(20.0, "Seconds of reports", flag="--duration")

    def main(params: PushBench) -> dict[str, Any]: ...

Each field is one option: its name gives the flag (``--clients``; ``flag=`` when the flag must differ
from the Python name, e.g. a unit suffix), its default and help are written once, here. A repeatable
option is a ``tuple[X, ...]`` field (typer sees ``list[X]``, the dataclass gets a tuple, so it stays
hashable and frozen); a ``bool`` field is a ``--x/--no-x`` switch. Why a dataclass and not ``main``'s
keyword arguments: the same parameters are what a bench passes around and what the result records, and
a field can carry its help and flag, a keyword argument cannot without a CLI type in its annotation.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")

_HELP = "hearth_bench.help"
_FLAG = "hearth_bench.flag"


def option(default: T, help: str, *, flag: str | None = None) -> T:
    """A dataclass field that is one ``hearth bench`` option: its default, its help, its flag if not
    ``--<field-name>``. Typed as its default so that the dataclass reads as plain fields."""
    field: T = dataclasses.field(default=default, metadata={_HELP: help, _FLAG: flag})
    return field


@dataclass(frozen=True)
class BenchOption:
    """One option derived from one field: what typer is given, and how its value goes back."""

    name: str  # the field's (and the generated parameter's) name
    flags: tuple[str, ...]  # empty: typer's own ``--name`` (``--x/--no-x`` for a bool)
    help: str
    default: Any
    annotation: Any  # the type typer converts to (``list[X]`` for a ``tuple[X, ...]`` field)
    repeated: bool  # a tuple field: typer's list becomes a tuple again


def params_class(main: Callable[..., object]) -> type[Any]:
    """The frozen dataclass a bench's ``main(params)`` takes (its only parameter)."""
    hints = typing.get_type_hints(main)
    hints.pop("return", None)
    if len(hints) != 1:
        raise TypeError(f"{main.__qualname__} must take one parameter, its bench's dataclass: {hints}")
    (cls,) = hints.values()
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{main.__qualname__}'s parameter must be a frozen dataclass, not {cls!r}")
    return cls


def bench_options(cls: type[Any]) -> list[BenchOption]:
    """The options of a bench's dataclass, in field order; a field without ``option(...)`` is an error
    (every parameter is reachable from the command line, with its help)."""
    hints = typing.get_type_hints(cls)
    options = []
    for f in dataclasses.fields(cls):
        if _HELP not in f.metadata or f.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__qualname__}.{f.name} is not declared with option(default, help)")
        kind = hints[f.name]
        repeated = typing.get_origin(kind) is tuple
        if repeated:
            (item, _ellipsis) = typing.get_args(kind)
            kind = list[item]  # type: ignore[valid-type]
        flag: str | None = f.metadata[_FLAG]
        flags: tuple[str, ...] = ()
        if flag is not None:
            flags = (f"{flag}/--no-{flag.removeprefix('--')}",) if kind is bool else (flag,)
        default: Any = f.default
        if repeated:
            default = list(default)
        options.append(BenchOption(f.name, flags, f.metadata[_HELP], default, kind, repeated))
    return options


def command_help(cls: type[Any]) -> str:
    """The command's help: the dataclass's own docstring (not the one dataclass makes up)."""
    doc = cls.__doc__ or ""
    if not doc or doc.startswith(f"{cls.__name__}("):
        raise TypeError(f"{cls.__qualname__} needs a docstring: it is the help of its command")
    return inspect.cleandoc(doc)


def typer_callback(main: Callable[[Any], object]) -> Callable[..., None]:
    """A function typer can register: keyword parameters derived from ``main``'s dataclass, a body that
    builds the dataclass from them and runs ``main``."""
    cls = params_class(main)
    options = bench_options(cls)

    def callback(**values: Any) -> None:
        for o in options:
            if o.repeated:
                values[o.name] = tuple(values[o.name])
        main(cls(**values))

    parameters = [
        inspect.Parameter(
            o.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=o.default,
            annotation=Annotated[o.annotation, typer.Option(*o.flags, help=o.help)],
        )
        for o in options
    ]
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    callback.__doc__ = command_help(cls)
    callback.__name__ = callback.__qualname__ = main.__module__.rsplit(".", 1)[-1]
    return callback
