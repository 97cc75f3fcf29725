"""The workload registry: one explicit, typed table keyed by name.

A workload is a subclass of :class:`Workload` registered with
:func:`register_workload`. Built-in workloads live one family per module in
this package; users register their own the same way (see the README).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from accelbench.errors import ConfigError
from accelbench.spec import SIZES, SizeName

if TYPE_CHECKING:
    import torch

Batch = tuple["torch.Tensor", ...]


class Workload(ABC):
    """A trainable model with synthetic data and a real loss.

    Subclasses set the class attributes and implement the three methods. The
    runner calls :meth:`build_model` and :meth:`make_batch` once, outside the
    timed loop, then times ``loss(model, batch).backward()`` plus the optimizer
    step.
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
    """Batch sizes per size; the first is the default of ``accelbench run``."""
    learning_rate: ClassVar[float] = 0.01
    """SGD learning rate used by the training step (momentum 0.9)."""

    @abstractmethod
    def build_model(self, size: SizeName) -> torch.nn.Module:
        """Build the model at ``size`` on the current default device (CPU or meta)."""

    @abstractmethod
    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Synthetic inputs and targets for one step, created on ``device``.

        ``generator`` is a CPU generator; draw on the CPU and move, or draw on
        the device with a device generator seeded from it.
        """

    @abstractmethod
    def loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """Forward pass and scalar training loss for ``batch``."""

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """Raise :class:`ConfigError` when ``batch_size`` does not fit the workload."""
        del size, batch_size

    def size_notes(self, size: SizeName) -> str:
        """Human description of the configuration at ``size`` (input shape, widths)."""
        del size
        return ""


W = TypeVar("W", bound=type[Workload])

_REGISTRY: dict[str, Workload] = {}
#: Where each registered workload came from, so worker processes can import it.
_ORIGINS: dict[str, str] = {}


def register_workload(cls: W) -> W:
    """Class decorator: add a :class:`Workload` subclass to the registry.

    Raises:
        ConfigError: the name is taken by another class, or the class is incomplete.
    """
    for attr in ("name", "family", "sample_unit", "default_batch_sizes"):
        if not hasattr(cls, attr):
            raise ConfigError(f"workload class {cls.__qualname__} must define {attr!r}")
    name = cls.name
    missing = [s for s in SIZES if s not in cls.default_batch_sizes]
    if missing:
        raise ConfigError(f"workload {name!r} has no default batch sizes for {missing}")
    existing = _REGISTRY.get(name)
    if existing is not None:
        same = (
            type(existing).__qualname__ == cls.__qualname__
            and _ORIGINS.get(name) == _origin_of(cls)
        )
        if not same:
            raise ConfigError(f"workload {name!r} is already registered")
    _REGISTRY[name] = cls()
    _ORIGINS[name] = _origin_of(cls)
    return cls


def _origin_of(cls: type) -> str:
    module = cls.__module__
    if module == "__main__" or module.startswith("__accelbench_plugin_"):
        path = getattr(sys.modules.get(module), "__file__", None)
        return str(Path(path).resolve()) if path else module
    return module


def _ensure_builtins() -> None:
    # Imported lazily: registering needs no torch until a model is built.
    importlib.import_module("accelbench.workloads.builtin")


def get_workload(name: str) -> Workload:
    """Return the registered workload ``name``.

    Raises:
        ConfigError: unknown name, with the closest registered names.
    """
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"unknown workload {name!r}{hint} (see 'accelbench list')"
        ) from None


def list_workloads() -> list[Workload]:
    """Every registered workload, sorted by family then name."""
    _ensure_builtins()
    return sorted(_REGISTRY.values(), key=lambda w: (w.family, w.name))


def workload_origin(name: str) -> str:
    """Module name or file path that registers ``name`` (for worker processes)."""
    get_workload(name)
    return _ORIGINS[name]


def load_plugin(origin: str) -> None:
    """Import a module by name, or a Python file by path, that registers workloads.

    Raises:
        ConfigError: the module or file cannot be imported.
    """
    if origin.startswith("accelbench."):
        importlib.import_module(origin)
        return
    path = Path(origin)
    try:
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
            spec.loader.exec_module(module)
        else:
            importlib.import_module(origin)
    except ConfigError:
        raise
    except Exception as exc:  # a user's module may raise anything on import
        raise ConfigError(f"cannot import plugin {origin!r}: {exc}") from exc
