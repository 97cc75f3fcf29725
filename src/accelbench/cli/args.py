"""Arguments shared by the subcommands: value types, the result filters, and the
generator that turns the option dataclasses of :mod:`accelbench.spec` into arguments.

:func:`add_options` adds one argument per field that declares a flag (its type, bounds,
choices, help and default all come from the field); :func:`options_from_args` reads them
back into the dataclass, refusing the combinations the fields declare as conflicting.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.errors import ConfigError
from accelbench.names import fold, number_problem
from accelbench.options import (
    FieldOption,
    bounds_problem,
    check_applies,
    check_conflicts,
    field_options,
    to_field_value,
)
from accelbench.readouts import FILTERS_TITLE, ResultFilters, select

if TYPE_CHECKING:
    from accelbench.store import ResultFilter

T = TypeVar("T")
ArgTarget = argparse.ArgumentParser | argparse._ArgumentGroup


# --------------------------------------------------------------------------- value types
# Argument types that refuse what the spec dataclasses would refuse, at parse time, with
# argparse's "argument --x: ..." prefix (one line: see cli.OneLineParser).


def parse_int(text: str) -> int:
    """``int(text)`` for a command line: ASCII digits only (:func:`names.number_problem`).

    Raises:
        argparse.ArgumentTypeError: digits of another script.
        ValueError: no integer.
    """
    problem = number_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return int(text)


def parse_float(text: str) -> float:
    """``float(text)`` for a command line: ASCII digits only, like :func:`parse_int`."""
    problem = number_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return float(text)


def nonempty(text: str) -> str:
    """A string argument that must not be empty or blank (ids, paths, names)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


# --------------------------------------------------------------------------- the generator


def _value_type(fo: FieldOption) -> Callable[[str], Any]:
    """The argparse type of an option: parse the text, then the field's own check
    (:func:`options.bounds_problem`, the one check behind every option)."""

    def parse(text: str) -> Any:
        value: Any = text
        if fo.opt.parse is not None:
            return fo.opt.parse(text)
        if fo.kind is str and (fo.opt.fold or fo.choices) and text.strip():
            value = fold(text)
        if fo.kind is int:
            try:
                value = parse_int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected an integer, got {text!r}") from None
        elif fo.kind is float:
            try:
                value = parse_float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        problem = bounds_problem(value, fo.opt, fo.kind, cli=True, typed=text)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = fo.opt.parse.__name__ if fo.opt.parse is not None else \
        {int: "integer", float: "number"}.get(fo.kind, "value")
    return parse


def _help(fo: FieldOption, prefix: str = "", shown: Mapping[str, Any] | None = None) -> str:
    text = prefix + fo.opt.help
    default = fo.default()
    if shown is not None and fo.name in shown:
        default = shown[fo.name]
    if fo.opt.default_text is not None and (shown is None or fo.name not in shown):
        text += f" ({fo.opt.default_text})" if fo.opt.default_text else ""
    elif default is not None and fo.kind is not bool and default not in ("", ()):
        shown = default * fo.opt.scale if fo.kind is float else default
        text += f" (default {shown:g})" if isinstance(shown, float) else f" (default {shown})"
    return text.replace("%", "%%")


def add_options(  # noqa: PLR0913
    p: ArgTarget, cls: type, *, title: str | None = None, description: str | None = None,
    only: Collection[str] | None = None, skip: Collection[str] = (), filled: bool = False,
    prefix: str = "", shown: Mapping[str, Any] | None = None,
) -> None:
    """One argument per flagged field of dataclass ``cls`` (in field order), in a group
    titled ``title``; ``only``/``skip`` pick fields by name. Absent options read back as
    None, so :func:`options_from_args` applies only what the user typed; ``filled``: as
    the field's default instead (what a handler reads directly, ``args.framework``).
    ``prefix`` starts each help (``with --model: ``); ``shown``: the defaults the
    command applies itself (field name -> value), shown instead of the field's.

    This is the one place a subcommand's arguments are added (``tests/test_cli_flags.py``
    checks that no other module calls ``add_argument``)."""
    target: ArgTarget = p.add_argument_group(title, description) if title and isinstance(
        p, argparse.ArgumentParser) else p
    groups: dict[str, ArgTarget] = {}
    exclusive: dict[str, ArgTarget] = {}
    for fo in field_options(cls):
        opt = fo.opt
        if opt.flag is None or fo.name in skip or (only is not None and fo.name not in only):
            continue
        here = target
        if opt.group is not None and isinstance(p, argparse.ArgumentParser):
            if opt.group not in groups:
                groups[opt.group] = p.add_argument_group(opt.group)
            here = groups[opt.group]
        if opt.exclusive is not None:
            if opt.exclusive not in exclusive:
                exclusive[opt.exclusive] = here.add_mutually_exclusive_group()
            here = exclusive[opt.exclusive]
        _add_one(here, fo, filled=filled, helptext=_help(fo, prefix, shown))


class _Given(argparse.Action):
    """Store the value and remember it was typed (:attr:`Option.track`)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None
                 ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def _add_one(target: ArgTarget, fo: FieldOption, *, filled: bool, helptext: str) -> None:
    opt = fo.opt
    assert opt.flag is not None
    default = fo.default() if filled else None
    names = (opt.flag,) if opt.positional else (*opt.aliases, opt.flag)
    where: dict[str, Any] = {} if opt.positional else {"dest": fo.name}
    if opt.required:
        where["required"] = True
    if fo.kind is bool:
        action = target.add_argument(*names, **where, action="store_true", default=default,
                                     help=helptext)
        action.option_field = fo  # type: ignore[attr-defined]  # generated (the tests look)
        return
    extra: dict[str, Any] = {"nargs": "?", "const": opt.const} if opt.const is not None \
        else {"nargs": opt.nargs} if opt.nargs else {}
    if opt.many:
        extra["action"] = "append"
        default = [] if filled or default is not None else None
    elif opt.track:
        extra["action"] = _Given
        target.set_defaults(**{f"{fo.name}_given": False})
    metavar = opt.metavar if opt.positional or fo.choices else \
        opt.metavar or opt.flag[2:].upper().replace("-", "_")
    kwargs: dict[str, Any] = {} if opt.positional and default is None else {"default": default}
    action = target.add_argument(*names, **where, **kwargs, **extra, type=_value_type(fo),
                                 choices=fo.choices or None, metavar=metavar,
                                 help=helptext or None)
    action.option_field = fo  # type: ignore[attr-defined]
    if opt.canonical is not None:  # applied once plugins are loaded (canonical_options)
        target.set_defaults(canonical_options=(
            *(target.get_default("canonical_options") or ()), (fo.name, opt.canonical)))
    if opt.off_flag:
        off = target.add_argument(opt.off_flag, dest=f"{fo.name}_off", action="store_true",
                                  default=None, help=f"no {opt.help.split(' before')[0]} "
                                  f"({opt.flag} {opt.off_value:g})")
        off.option_field = fo  # type: ignore[attr-defined]


def spelled_options(cls: type, args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The options of ``cls`` the user typed: field name -> (the flag typed, the value in
    field units), after the declared conflicts are checked."""
    out: dict[str, tuple[str, Any]] = {}
    for fo in field_options(cls):
        opt = fo.opt
        if opt.flag is None or not hasattr(args, fo.name):
            continue
        value = getattr(args, fo.name)
        if getattr(args, f"{fo.name}_off", None):
            if value is not None:
                raise ConfigError(f"{opt.flag} conflicts with {opt.off_flag}")
            out[fo.name] = (opt.off_flag or opt.flag, opt.off_value)
        elif fo.kind is bool and not opt.negate and value is False:
            continue  # a store_true flag not typed (its filled default), so not spelled
        elif value is not None:
            out[fo.name] = (opt.flag, False if opt.negate else to_field_value(fo, value))
    check_conflicts(cls, {name: flag for name, (flag, _v) in out.items()})
    return out


def options_from_args(cls: type[T], args: argparse.Namespace, base: T | None = None) -> T:
    """``base`` (default: ``cls()``) with the options of ``cls`` the user typed applied,
    validated by the dataclass itself."""
    spelled = spelled_options(cls, args)
    given = {name: value for name, (_flag, value) in spelled.items()}
    built = dataclasses.replace(base if base is not None else cls(), **given)  # type: ignore[type-var]
    check_applies(built, {name: flag for name, (flag, _v) in spelled.items()})
    return built


def check_plan_applies(plan: Any, given: dict[str, tuple[str, Any]]) -> None:
    """:func:`options.check_applies` on each option object of a suite ``plan`` (``given``:
    plan key such as ``topology.dist_backend`` -> (the flag typed, its value))."""
    for key in {k.partition(".")[0] for k in given if "." in k}:
        spelled = {k.partition(".")[2]: flag for k, (flag, _v) in given.items()
                   if k.startswith(key + ".")}
        check_applies(getattr(plan, key), spelled)


# --------------------------------------------------------------------------- combinations


@dataclasses.dataclass(frozen=True)
class OptionRule:
    """Options of one subcommand that do something only in some combination: given
    outside it they are refused (exit 2) rather than accepted and ignored."""

    parser: argparse.ArgumentParser
    flags: tuple[str, ...]
    applies: Callable[[argparse.Namespace], bool]
    """Whether the options do something with the arguments given."""
    why: str
    """The rest of the message after the flag (``needs --list``)."""


def refuse_unless(p: argparse.ArgumentParser, flags: Collection[str],
                  applies: Callable[[argparse.Namespace], bool] | str, why: str = "") -> None:
    """Refuse each of ``flags`` given (a value other than its default) where ``applies``
    does not hold: a callable of the arguments, or a flag that must be given too (``why``
    defaults to ``needs FLAG``). Checked by :func:`check_option_rules` before the command
    runs; ``flags`` must be options of ``p`` already added."""
    if isinstance(applies, str):
        other = _action(p, applies)
        why = why or f"needs {applies}"
        rule = OptionRule(p, tuple(flags), lambda a: _given(a, other), why)
    else:
        rule = OptionRule(p, tuple(flags), applies, why)
    for flag in rule.flags:
        _action(p, flag)  # a typo in a rule is a bug: fail when the parser is built
    p.set_defaults(option_rules=(*(p.get_default("option_rules") or ()), rule))


def options_of(p: argparse.ArgumentParser, *, but: Collection[str] = ()) -> list[str]:
    """Every option flag ``p`` has so far (its long spelling), but ``but`` and --help."""
    flags = []
    for action in p._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if long and long[0] != "--help" and not set(action.option_strings) & set(but):
            flags.append(long[0])
    return flags


def _action(p: argparse.ArgumentParser, flag: str) -> argparse.Action:
    for action in p._actions:
        if flag in action.option_strings:
            return action
    raise ValueError(f"{p.prog} has no option {flag}")


def _given(args: argparse.Namespace, action: argparse.Action) -> bool:
    value = getattr(args, action.dest, action.default)
    return value is not None and value != action.default and value != []


def check_option_rules(args: argparse.Namespace) -> None:
    """Refuse an option given where it does nothing (:func:`refuse_unless`).

    Raises:
        ConfigError: naming the first such option and why.
    """
    for rule in getattr(args, "option_rules", None) or ():
        if rule.applies(args):
            continue
        for flag in rule.flags:
            if _given(args, _action(rule.parser, flag)):
                raise ConfigError(f"{flag} {rule.why}")


def canonical_options(args: argparse.Namespace) -> None:
    """Turn each value of an option declared with ``canonical=`` into its canonical form
    (``--framework pytorch`` -> ``torch``), once the plugins are loaded (a plugin's
    framework is a name only after its file registered it).

    Raises:
        ConfigError: a value with no canonical form (an unknown framework).
    """
    for dest, canonical in getattr(args, "canonical_options", None) or ():
        value = getattr(args, dest, None)
        if isinstance(value, str) and value.strip():
            setattr(args, dest, canonical(value))


# --------------------------------------------------------------------------- result filters


def add_filter_args(p: argparse.ArgumentParser, *, status: bool = True,
                    limit: bool = True) -> None:
    """The result filters of ``results``, ``report``, ``compare`` and ``export`` (``status``
    and ``limit``: with ``--status`` and ``--limit``, for the commands that apply them)."""
    skip = (() if status else ("status",)) + (() if limit else ("limit",))
    add_options(p, ResultFilters, title=FILTERS_TITLE, skip=skip, filled=True)


def result_filter(args: argparse.Namespace, store: Any, **fixed: Any) -> ResultFilter:
    """A :class:`ResultFilter` from :func:`add_filter_args` options; ``fixed`` overrides
    them (:func:`accelbench.readouts.select`, which the API uses too)."""
    filters = ResultFilters(**{f.name: getattr(args, f.name, None)
                               for f in dataclasses.fields(ResultFilters)})
    return select(store, filters, **fixed)


# --------------------------------------------------------------------------- common groups


def add_measurement_args(p: argparse.ArgumentParser, *, repeats: bool = True,
                         tag: bool = True) -> None:
    """The measurement group of every measuring command: the :class:`MeasurementPolicy`
    options (``repeats``: with ``--repeats``), ``--threads`` and (``tag``) ``--tag``."""
    from accelbench.spec import MeasurementPolicy, RunChoices

    g = p.add_argument_group("measurement")
    add_options(g, MeasurementPolicy, skip=() if repeats else ("repeats",))
    add_options(g, RunChoices, only=("threads", "tag") if tag else ("threads",), filled=True)


def add_framework_arg(p: ArgTarget, *, filled: bool = True) -> None:
    """``--framework`` alone (commands that take no other case choice); not ``filled``:
    None unless typed."""
    from accelbench.spec import RunChoices

    add_options(p, RunChoices, only=("framework",), filled=filled)


