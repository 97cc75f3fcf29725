"""The workload registries: framework-neutral descriptions, and implementations per framework.

A workload is described once, framework-neutrally, by a :class:`Workload`
subclass registered with :func:`register_workload`: its name, family, sample
unit, sizes (with their configuration and notes), default batch sizes,
learning rate and loss kind. Each framework that can train it registers an
implementation keyed by ``(workload, framework)`` with the class decorator
:func:`implements` (a class defined in a backend's terms, e.g.
``accelbench.backends.torch.TorchModel``), in the backend's own model file.

The built-in descriptions are every module of this package; the built-in
implementations are found by reading the ``@implements`` lines of each backend's
model files (``Backend.models``) without importing them, so that listing
workloads imports no framework; a model file is imported when its class is used.

A workload class that defines the methods a backend names in
``self_implementing`` (torch: ``build_model``/``make_batch``/``loss``, the
single-class form of accelbench 0.1) is registered as both the description and
its own implementation for that backend.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from abc import ABC
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from accelbench.errors import ConfigError, unknown_name
from accelbench.frameworks import (
    backend_origin,
    framework_names,
    lookup,
    normalize_framework,
    origin_of,
)
from accelbench.names import check_identifier, fold
from accelbench.workloads.sizes import SIZES, SizeName

#: Synthetic inputs and targets of one step, in the framework's array type.
Batch = tuple[Any, ...]


def check_positive_batch_size(name: str, batch_size: int) -> None:
    """Raise :class:`ConfigError` unless ``batch_size`` is a positive int.

    Args:
        name: Workload name, for the message.
        batch_size: The requested batch size.

    Raises:
        ConfigError: ``batch_size`` is not an int >= 1.
    """
    # bool is an int subclass; True as a batch size is certainly a mistake.
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"{name}: batch size must be a positive integer, got {batch_size!r}")


def check_token_batch(name: str, size: str, batch_size: int, seq_len: int) -> None:
    """Raise :class:`ConfigError` unless ``batch_size`` (a count of tokens) is a positive
    multiple of ``seq_len`` (workloads whose sample unit is the token).

    Args:
        name: Workload name, for the message.
        size: The size, for the message.
        batch_size: The requested batch size, in tokens.
        seq_len: Tokens per sequence at ``size``.
    """
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or batch_size < seq_len
        or batch_size % seq_len
    ):
        raise ConfigError(
            f"{name}: batch size counts tokens and must be a positive multiple of "
            f"the sequence length {seq_len} at size {size!r}, got {batch_size!r}"
        )


class Workload(ABC):
    """A framework-neutral description of a trainable model on synthetic data.

    Subclasses set the class attributes; families override :meth:`config`,
    :meth:`size_notes` and :meth:`validate_batch_size`.
    How the model is built and trained lives in one implementation per framework.
    """

    name: ClassVar[str]
    """Registry key, lower case, as users type it."""
    family: ClassVar[str]
    """Model family: ``cnn``, ``rnn``, ``transformer``, ``speech`` ..."""
    sample_unit: ClassVar[str]
    """What one sample is: ``image``, ``sentence``, ``utterance``, ``token`` ..."""
    description: ClassVar[str] = ""
    """One line shown by ``accelbench list``."""
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]]
    """Batch sizes per size; the first is the default of ``accelbench run``. Every
    workload has the sizes of :data:`~accelbench.spec.SIZES`; a key beyond them declares
    a size of this workload only (``gpt2`` of ``llm``), accepted by ``--size`` for it."""
    learning_rate: ClassVar[float] = 0.01
    """Learning rate of the training step, the same in every framework."""
    optimizer: ClassVar[str] = "sgd"
    """The optimizer, the same in every framework: ``sgd`` (momentum 0.9, the paper's six
    models) or ``adamw`` (betas 0.9/0.95, ``weight_decay``; the practice for the
    transformers trained today)."""
    weight_decay: ClassVar[float] = 0.0
    """Decoupled weight decay of ``adamw``."""
    loss_kind: ClassVar[str] = "custom"
    """The training loss, named: ``cross_entropy``, ``ctc``, ``mse`` ..."""

    def sizes(self) -> tuple[SizeName, ...]:
        """Every size of this workload: the common ones, then its own extra sizes."""
        return SIZES + tuple(s for s in self.default_batch_sizes if s not in SIZES)

    def check_size(self, size: str) -> SizeName:
        """Return ``size`` if this workload has it.

        Raises:
            ConfigError: another workload's size or an unknown one, with close matches.
        """
        size = fold(size)
        if size not in self.sizes():
            close = difflib.get_close_matches(str(size), self.sizes(), n=3, cutoff=0.5)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ConfigError(f"workload {self.name!r} has no size {size!r}; choose one of "
                              f"{', '.join(self.sizes())}{hint}")
        return size

    def analytic_flops(self, size: SizeName, batch_size: int) -> Any:
        """The analytic FLOP count of a step at ``size``
        (:class:`accelbench.workloads.analytic.AnalyticFlops`), or None where the
        flop counter's figure is the record's (the default)."""
        del size, batch_size
        return None

    @property
    def workload(self) -> Workload:
        """The description itself, so a single-class workload (description plus
        ``build_model``/``make_batch``/``loss``) serves as its own torch implementation."""
        return self

    def config(self, size: SizeName) -> Any:
        """The model's configuration at ``size`` (a frozen dataclass), shared by every
        framework's implementation; None for workloads without one."""
        del size
        return None

    def tp_split_params(self, size: SizeName, degree: int) -> int | None:
        """Parameters a tensor-parallel plan of ``degree`` splits over its ranks (the blocks'
        planned projections' weights and the column-wise ones' biases; embeddings, norms,
        heads and row-wise biases stay whole); None for a workload without a plan. The memory
        estimate (``planning/memory.py``) reads it."""
        del size, degree
        return None

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """Raise :class:`ConfigError` when ``batch_size`` does not fit the workload."""
        del size
        check_positive_batch_size(self.name, batch_size)

    def size_notes(self, size: SizeName) -> str:
        """Human description of the configuration at ``size`` (input shape, widths)."""
        del size
        return ""


W = TypeVar("W", bound=type[Workload])
C = TypeVar("C", bound=type)


@dataclass(slots=True)
class _Impl:
    """One registered implementation: a class, or an import path not yet imported."""

    origin: str
    """Module name or file path that registers it (what a worker imports)."""
    target: type | str
    instance: Any = None


_REGISTRY: dict[str, Workload] = {}
#: Where each registered workload came from, so worker processes can import it.
_ORIGINS: dict[str, str] = {}
_IMPLS: dict[tuple[str, str], _Impl] = {}
_builtins_loaded: list[bool] = []

#: ``@implements("name")`` or ``@implements("name", framework="fw")`` directly above
#: ``class Name``: the line :func:`declared_implementations` reads.
_IMPLEMENTS_RE = re.compile(
    r"^@implements\(\s*[\"']([\w.-]+)[\"']\s*(?:,\s*framework\s*=\s*[\"'](\w+)[\"']\s*)?\)"
    r"\s*\nclass\s+(\w+)", re.MULTILINE)


def register_workload(cls: W) -> W:
    """Class decorator: add a :class:`Workload` description to the registry.

    A class that also defines the methods a backend names in ``self_implementing``
    (torch: ``build_model``, ``make_batch`` and ``loss``) is registered as its own
    implementation for that backend too.

    Raises:
        ConfigError: the name is taken by another class, or the class is incomplete.
    """
    for attr in ("name", "family", "sample_unit", "default_batch_sizes"):
        if not hasattr(cls, attr):
            raise ConfigError(f"workload class {cls.__qualname__} must define {attr!r}")
    name = cls.name
    origin = origin_of(cls.__module__)
    check_identifier("workload", name, origin)
    for size in cls.default_batch_sizes:
        check_identifier(f"workload {name!r}: size", size, origin)
    missing = [s for s in SIZES if s not in cls.default_batch_sizes]
    if missing:
        raise ConfigError(f"workload {name!r} has no default batch sizes for {missing}")
    existing = _REGISTRY.get(name)
    if existing is not None:
        same = type(existing).__qualname__ == cls.__qualname__ and _ORIGINS.get(name) == origin
        if not same:
            raise ConfigError(f"workload {name!r} is already registered")
    instance = cls()
    _REGISTRY[name] = instance
    _ORIGINS[name] = origin
    for fw in framework_names():
        methods = getattr(lookup(fw), "self_implementing", ())
        if methods and all(callable(getattr(cls, m, None)) for m in methods):
            _IMPLS[(name, fw)] = _Impl(origin=origin, target=cls, instance=instance)
    return cls


def implements(workload: str, *, framework: str) -> Callable[[C], C]:
    """Class decorator: register ``cls`` as ``workload``'s implementation for ``framework``.

    Written in a backend's model file (``@implements("resnet50", framework="torch")``)
    or a plugin. The class is instantiated on first use with the workload's description
    as its only argument (``cls(description)``).

    Raises:
        ConfigError: unknown framework, or another class already implements the pair.
    """
    fw = normalize_framework(framework)  # the plugin's boundary: its name as it wrote it

    def decorate(cls: C) -> C:
        origin = origin_of(cls.__module__)
        existing = _IMPLS.get((workload, fw))
        if existing is not None and not _same_impl(existing, cls, origin):
            raise ConfigError(f"workload {workload!r} already has a {fw} implementation")
        _IMPLS[(workload, fw)] = _Impl(origin=origin, target=cls)
        return cls

    return decorate


def register_implementation(workload: str, framework: str) -> Callable[[C], C]:
    """``@register_implementation("name", "fw")``: :func:`implements` with the framework
    given by position (the form of accelbench 0.2 plugins)."""
    return implements(workload, framework=framework)


def declared_implementations(package: str, framework: str) -> list[tuple[str, str, str]]:
    """``(workload, framework, "module:Class")`` of every ``@implements`` line in the model
    files of ``package``, read as text: nothing is imported but the package itself."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for info in pkgutil.iter_modules(spec.submodule_search_locations):
        path = Path(info.module_finder.path) / f"{info.name}.py"  # type: ignore[union-attr]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for workload, fw, cls in _IMPLEMENTS_RE.findall(text):
            out.append((workload, fw or framework, f"{package}.{info.name}:{cls}"))
    return out


def _same_impl(existing: _Impl, cls: type, origin: str) -> bool:
    target = existing.target
    if isinstance(target, str):
        return target == f"{cls.__module__}:{cls.__qualname__}"
    return target.__qualname__ == cls.__qualname__ and existing.origin == origin


def _ensure_builtins() -> None:
    """Register the built-in descriptions (every module of this package) and declare the
    built-in implementations of every backend (once; imports no framework)."""
    if _builtins_loaded:
        return
    _builtins_loaded.append(True)
    package = importlib.import_module("accelbench.workloads")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"accelbench.workloads.{info.name}")
    for fw in framework_names():
        models = getattr(lookup(fw), "models", None)
        for workload, impl_fw, path in declared_implementations(models, fw) if models else ():
            # a built-in model file names its framework by the registry key
            _IMPLS.setdefault((workload, impl_fw),
                              _Impl(origin=path.split(":", 1)[0], target=path))


def get_workload(name: str) -> Workload:
    """Return the registered workload description ``name``.

    Raises:
        ConfigError: unknown name, with the closest registered names.
    """
    _ensure_builtins()
    try:
        return _REGISTRY[fold(name)]
    except KeyError:
        raise unknown_name("workload", name, _REGISTRY, "see 'accelbench list'") from None


def all_size_names() -> tuple[str, ...]:
    """The common sizes, then every registered workload's own extra sizes."""
    _ensure_builtins()
    extra = (s for w in _REGISTRY.values() for s in w.sizes())
    return tuple(dict.fromkeys((*SIZES, *extra)))


def list_workloads() -> list[Workload]:
    """Every registered workload, sorted by family then name."""
    _ensure_builtins()
    return sorted(_REGISTRY.values(), key=lambda w: (w.family, w.name))


def implementation_frameworks(name: str) -> tuple[str, ...]:
    """Frameworks that implement workload ``name``, in the registry's order (torch, jax,
    then plugins')."""
    get_workload(name)
    return tuple(fw for fw in framework_names() if (name, fw) in _IMPLS)


def check_implemented(name: str, framework: str) -> str:
    """``framework`` (a registry key: names are normalised where they are given, by the
    ``framework`` option of :class:`~accelbench.spec.RunChoices` and
    :class:`~accelbench.spec.RunSpec`) if it implements workload ``name``; else
    :class:`ConfigError`."""
    have = implementation_frameworks(name)
    if framework not in have:
        others = ", ".join(have) or "none"
        raise ConfigError(
            f"workload {name!r} has no {framework} implementation (implemented for: {others})"
        )
    return framework


def get_implementation(name: str, framework: str) -> Any:
    """The implementation object of workload ``name`` for ``framework`` (imports it).

    Raises:
        ConfigError: no such workload, or no implementation for the framework.
    """
    impl = _IMPLS[(name, check_implemented(name, framework))]
    if impl.instance is None:
        target = impl.target
        if isinstance(target, str):
            module, _, qualname = target.partition(":")
            target = getattr(importlib.import_module(module), qualname)
            impl.target = target
        impl.instance = target(get_workload(name))
    return impl.instance


def workload_origin(name: str, framework: str | None = None) -> str:
    """Module name or file path a worker imports to find ``name`` (and its implementation)."""
    get_workload(name)
    if framework is not None:
        return _IMPLS[(name, check_implemented(name, framework))].origin
    return _ORIGINS[name]


def worker_plugins(name: str, framework: str) -> list[str]:
    """Plugin modules or files a worker must import to run ``name`` on ``framework``."""
    origins = [backend_origin(framework), workload_origin(name), workload_origin(name, framework)]
    return [o for o in dict.fromkeys(origins) if not o.startswith("accelbench.")]


def load_plugin(origin: str) -> None:
    """Import a module by name, or a Python file by path, that registers workloads.

    Raises:
        ConfigError: the module or file cannot be imported.
    """
    if origin.startswith("accelbench."):
        importlib.import_module(origin)
        return
    from accelbench.workloads.plugin_guard import PluginExit, no_hard_exit

    path = Path(origin)
    try:
        with no_hard_exit():
            _import_plugin(origin, path)
    except PluginExit as exc:  # os._exit() at import would end accelbench in silence
        raise ConfigError(
            f"plugin {origin!r} called os._exit({exc.code!r}) while being imported"
        ) from None
    except ConfigError:
        raise
    except SystemExit as exc:  # sys.exit() at import must not end accelbench silently
        raise ConfigError(
            f"plugin {origin!r} called sys.exit({exc.code!r}) while being imported"
        ) from None
    except Exception as exc:  # a user's module may raise anything on import
        raise ConfigError(
            f"cannot import plugin {origin!r}: {type(exc).__name__}: {exc}"
        ) from exc


def _import_plugin(origin: str, path: Path) -> None:
    """Import plugin ``origin`` (a ``.py`` file at ``path``, else a module name)."""
    if path.suffix == ".py":
        if not path.is_file():
            raise ConfigError(f"plugin file {origin!r} does not exist")
        mod_name = f"__accelbench_plugin_{abs(hash(str(path.resolve())))}"
        if mod_name in sys.modules:
            return
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"cannot import plugin file {origin!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[mod_name]  # a failed import is not a loaded plugin
            raise
    else:
        importlib.import_module(origin)
