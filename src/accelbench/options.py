"""One definition per option: the metadata a spec dataclass field carries.

Every user-facing option is a field of a frozen dataclass in :mod:`accelbench.spec`,
declared with :func:`option`: its default, help text, bounds, the unit of its flag, its
flag's spelling and the options it conflicts with. From that one declaration come

- the checks in the dataclass's ``__post_init__`` (:func:`validate_fields`),
- the command-line arguments (:func:`accelbench.cli.args.add_options` generates them,
  the only place a subcommand's arguments are added), and
- the keywords the Python API accepts, one name each (:mod:`accelbench.keywords`).

Beside the spec classes, each subcommand declares its own options the same way (a
dataclass of ``option()`` fields in its ``cli`` module, or shared in ``cli/flags.py``),
and every value typed is checked by :func:`bounds_problem`.

Adding an option is adding one field.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from accelbench.errors import ConfigError

#: The largest integer a store column holds everywhere (PostgreSQL INTEGER): batch sizes,
#: iteration counts and limits above it would overflow after the case ran.
MAX_INT32 = 2**31 - 1
#: ``conflicts=OTHERS``: every other option of the same dataclass.
OTHERS: tuple[str, ...] = ("*",)


@dataclass(frozen=True, slots=True)
class Option:
    """What one option is, beside its field's name, type and default."""

    help: str
    """One line for ``--help`` (the default is appended unless ``default_text`` is given)."""
    flag: str | None = None
    """Its command-line spelling (``--target-ci``); None: Python API only."""
    label: str | None = None
    """Its name in error messages where it has no flag (``warm-up minimum``)."""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    """``lo`` itself is refused (``> lo`` rather than ``>= lo``)."""
    cli_hi: Callable[[], int] | None = None
    """A tighter upper bound for new values typed by users (``--threads``: this machine's
    CPUs); records read back are checked against ``hi`` only."""
    scale: float = 1.0
    """Flag units per field unit (1000 for a ``-ms`` flag of an ``_s`` field): the one
    place a unit is converted."""
    nonempty: bool = False
    """Strings: blank is refused."""
    fold: bool = False
    """Strings: a name, accepted in any letter case and kept in its canonical lower-case
    form (:func:`accelbench.names.fold`; fields with choices always are)."""
    check: Callable[[Any], str | None] | None = None
    """A further check of the value: what is wrong with it, or None (``--tag``)."""
    canonical: Callable[[str], str] | None = None
    """Strings: the value's one canonical form, raising ``ConfigError`` for a value that has
    none (``--framework``: ``pytorch`` -> ``torch``). Applied where a value enters: by the
    CLI once the plugins are loaded (``cli.args.canonical_options``) and by
    :func:`validate_fields`, so the layers below get the canonical name and never
    normalise it again."""
    negate: bool = False
    """Booleans: the flag turns the field off (``--no-energy`` sets ``enabled=False``)."""
    off_flag: str | None = None
    """A second flag setting the field to ``off_value`` (``--no-idle``: ``idle_s=0``)."""
    off_value: Any = None
    conflicts: tuple[str, ...] = ()
    """Fields (of the same dataclass; :data:`OTHERS`: all of them) that may not be given
    on the command line together with this one."""
    why: str = ""
    """Why they conflict, shown in the message."""
    requires: tuple[str, ...] = ()
    """Fields that must be given on the command line when this one is."""
    applies: Callable[[Any], bool] | None = None
    """Whether the option does anything in the object built (``--dist-backend``: only
    with more than one rank); given on the command line where it does not, it is refused
    with ``applies_why`` rather than accepted and ignored (:func:`check_applies`)."""
    applies_why: str = ""
    metavar: str | None = None
    const: str | None = None
    """Strings: the flag may be given without a value, and then takes this one
    (``--mlflow`` alone: MLflow's default tracking URI)."""
    default_text: str | None = None
    """Replaces the generated ``(default ...)`` in the help."""
    choices: tuple[str, ...] = ()
    """Strings: the values accepted, where the field's type is no ``Literal`` (a registry's
    names known when the parser is built)."""
    many: bool = False
    """Repeatable (``--op matmul --op conv2d``): the field holds a tuple of values."""
    nargs: str | None = None
    """Positionals: ``?`` (optional) or ``*`` (any number)."""
    parse: Callable[[str], Any] | None = None
    """Command line: turns the text typed into the value (a list such as ``M,N,K``),
    raising ``argparse.ArgumentTypeError``; the field's bounds apply to each number in it."""
    aliases: tuple[str, ...] = ()
    """Further spellings of the flag (``-v`` for ``--verbose``)."""
    exclusive: str | None = None
    """Options of one dataclass with the same name here exclude each other (``--json`` or
    ``--csv``)."""
    group: str | None = None
    """The ``--help`` section it is listed under, where not the dataclass's."""
    required: bool = False
    track: bool = False
    """The command line also records whether it was typed (``args.<field>_given``)."""

    @property
    def name(self) -> str:
        """How messages name the option: its flag, else its label."""
        return self.flag or self.label or "?"

    @property
    def positional(self) -> bool:
        """The command line takes it by position (``flag`` without dashes)."""
        return self.flag is not None and not self.flag.startswith("-")



def option(default: Any = dataclasses.MISSING, *, help: str, **meta: Any) -> Any:  # noqa: A002
    """A dataclass field that is an option: ``default`` plus :class:`Option` metadata."""
    return dataclasses.field(default=default, metadata={"option": Option(help=help, **meta)})


# --------------------------------------------------------------------------- checks


def bounds_problem(value: Any, opt: Option, kind: type, *, cli: bool = False,
                   typed: str | None = None) -> str | None:
    """What is wrong with ``value`` (in flag units) for ``opt``, or None: the single check
    behind both the dataclass validation and the argparse types (``cli``: the bound for
    new values; ``typed``: the text the user typed, quoted in the message)."""
    got = repr(typed) if typed is not None else None
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, got {value!r}"
        lo = int(opt.lo) if opt.lo is not None else 1
        hi = opt.cli_hi() if cli and opt.cli_hi else int(opt.hi) if opt.hi is not None \
            else MAX_INT32
        if not lo <= value <= hi:
            return f"must be between {lo} and {hi}, got {got or value}"
        return None
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {got or value}"
        if opt.lo is not None and (value <= opt.lo if opt.lo_open else value < opt.lo):
            return f"must be {'>' if opt.lo_open else '>='} {opt.lo:g}, got {got or f'{value:g}'}"
        if opt.hi is not None and value > opt.hi:
            return f"must be <= {opt.hi:g}, got {got or f'{value:g}'}"
        return None
    if kind is str and opt.nonempty and (not isinstance(value, str) or not value.strip()):
        return "must not be empty"
    if opt.check is not None:
        return opt.check(value)
    return None


@dataclass(frozen=True, slots=True)
class FieldOption:
    """An option field of a dataclass: its field, metadata and value type."""

    field: dataclasses.Field[Any]
    opt: Option
    kind: type
    """``int``, ``float``, ``str`` or ``bool`` (None removed)."""
    optional: bool
    choices: tuple[str, ...]
    """A ``Literal`` field's values."""

    @property
    def name(self) -> str:
        return self.field.name

    def default(self) -> Any:
        if self.field.default is not dataclasses.MISSING:
            return self.field.default
        return None


_CACHE: dict[type, tuple[FieldOption, ...]] = {}


def _resolve(annotation: Any) -> tuple[type, bool, tuple[str, ...]]:
    args = get_args(annotation)
    optional = type(None) in args
    if optional:
        annotation = next(a for a in args if a is not type(None))
    if get_origin(annotation) is Literal:
        return str, optional, tuple(get_args(annotation))
    if get_origin(annotation) is tuple:  # a repeatable option: the type of one value
        return _resolve(get_args(annotation)[0])[0], optional, ()
    if get_origin(annotation) is list:  # a parsed list (``M,N,K``)
        return list, optional, ()
    return annotation, optional, ()


def _field_option(f: dataclasses.Field[Any], annotation: Any) -> FieldOption:
    opt: Option = f.metadata["option"]
    kind, optional, choices = _resolve(annotation)
    return FieldOption(f, opt, kind, optional, choices or opt.choices)


def field_options(cls: type) -> tuple[FieldOption, ...]:
    """The option fields of dataclass ``cls``, in declaration order."""
    found = _CACHE.get(cls)
    if found is None:
        import sys

        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        found = tuple(
            _field_option(f, hints[f.name])
            for f in dataclasses.fields(cls) if "option" in f.metadata)
        _CACHE[cls] = found
    return found


def validate_fields(obj: Any) -> None:
    """Check every option field of ``obj`` against its declaration (type, bounds,
    choices); :class:`ConfigError` naming the option at the first problem."""
    for fo in field_options(type(obj)):
        value = getattr(obj, fo.name)
        problem = field_problem(fo, value)
        if problem:
            raise ConfigError(problem)
        if fo.opt.canonical is not None and isinstance(value, str):
            object.__setattr__(obj, fo.name, fo.opt.canonical(value))


def field_problem(fo: FieldOption, value: Any) -> str | None:
    """What is wrong with ``value`` (in field units) for option field ``fo``, as one
    message naming the option, or None: choices, type and bounds (each value of a
    repeatable option)."""
    if value is None and fo.optional or fo.opt.parse is not None:
        return None  # a parsed value (``M,N,K``) was checked as it was parsed
    if fo.opt.many or fo.opt.nargs == "*":
        if not isinstance(value, (tuple, list)):
            return f"{fo.opt.name} must be a list of values, got {value!r}"
        for one in value:
            problem = field_problem(dataclasses.replace(fo, opt=dataclasses.replace(
                fo.opt, many=False, nargs=None)), one)
            if problem:
                return problem
        return None
    if fo.kind is list:
        return None if isinstance(value, (list, tuple, str)) else \
            f"{fo.opt.name} must be a list of values, got {value!r}"
    if fo.kind is bool:
        return None if isinstance(value, bool) else \
            f"{fo.opt.name} must be True or False, got {value!r}"
    if fo.choices and value not in fo.choices:
        return f"unknown {fo.opt.name} {value!r}; choose one of {', '.join(fo.choices)}"
    shown = value * fo.opt.scale if fo.kind is float and fo.opt.scale != 1.0 and \
        isinstance(value, (int, float)) and not isinstance(value, bool) else value
    problem = bounds_problem(shown, fo.opt, fo.kind)
    return f"{fo.opt.name} {problem}" if problem else None


# --------------------------------------------------------------------------- given values


def check_conflicts(cls: type, spelled: Mapping[str, str]) -> None:
    """Refuse options given together that ``cls`` declares as conflicting. ``spelled``:
    field name -> the flag the user typed for it (only the options given)."""
    names = {fo.name: fo.opt for fo in field_options(cls)}
    for fo in field_options(cls):
        if fo.name not in spelled:
            continue
        others = [n for n in names if n != fo.name] if fo.opt.conflicts == OTHERS \
            else list(fo.opt.conflicts)
        for other in others:
            if other in spelled:
                why = f" ({fo.opt.why})" if fo.opt.why else ""
                raise ConfigError(f"{spelled[other]} conflicts with {spelled[fo.name]}{why}")
        for needed in fo.opt.requires:
            if needed not in spelled:
                raise ConfigError(f"{spelled[fo.name]} needs {names[needed].name}")


def check_applies(obj: Any, spelled: Mapping[str, str]) -> None:
    """Refuse options given on the command line (``spelled``: field name -> the flag
    typed) that do nothing in ``obj`` as built (:attr:`Option.applies`)."""
    for fo in field_options(type(obj)):
        if fo.name in spelled and fo.opt.applies is not None and not fo.opt.applies(obj):
            raise ConfigError(f"{spelled[fo.name]} {fo.opt.applies_why or 'does nothing here'}")


def to_field_value(fo: FieldOption, value: Any) -> Any:
    """A value in flag units as the field holds it (``-ms`` -> seconds)."""
    if fo.opt.scale != 1.0 and value is not None and value != fo.opt.off_value:
        return value / fo.opt.scale
    return value


def same_option(cls: type, name: str, **changes: Any) -> Any:
    """Field ``name`` of option dataclass ``cls`` declared again in another one, with its
    default, bounds, flag and help (``changes``: the few :class:`Option` attributes that
    differ there, e.g. a help naming the other command's moment): one declaration,
    composed, rather than a copy that drifts."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    opt = dataclasses.replace(f.metadata["option"], **changes)
    return dataclasses.field(default=f.default, metadata={"option": opt})
