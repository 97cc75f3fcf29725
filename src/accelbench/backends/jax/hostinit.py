"""Building a JAX model without one XLA compile per parameter shape.

Flax's initialisers run eagerly, and every eager op is one XLA program per input shape: a
model's build compiled a random draw and a ``* stddev`` multiply for each distinct
parameter shape (tiny Inception-v3: 104 programs, 27 s of a 41 s build on this project's
2-core CPU), in every case, since each case is a fresh process.

:func:`host_init` draws at a size *bucket* instead (the next power of two of the element
count; one program per bucket, dtype and distribution), takes the first ``n`` values on the
host, and does the initialisers' scale multiply there (numpy). The values are the same bits:
with ``jax_threefry_partitionable`` on (jax's default since 0.5) a threefry draw's element
``i`` depends only on the key and ``i``, so the first ``n`` of a longer draw are the draw of
``n``; a multiply is IEEE on both sides (a draw is never subnormal, so XLA's flushing of
subnormals on CPUs cannot differ from numpy). ``jax.numpy.zeros`` and ``ones`` (biases, norm
scales, a BatchNorm's statistics: one broadcast program per shape) are made by numpy too.
Where that does not hold (the flag off, another PRNG, a traced key, a dtype other than
float32, an array argument that broadcasts, inside a trace) the call goes to jax unchanged.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from accelbench.backends.jax.runtime import import_jax

#: The jax.random draws served from a bucket.
DRAWS = ("normal", "uniform", "truncated_normal")
#: The jax.numpy constants made on the host (a BatchNorm's statistics, biases, scales).
FILLS = {"zeros": 0, "ones": 1}
#: Above this many elements a draw goes to jax as before: a large parameter is one of few,
#: and a host round trip (and a bucket up to twice its size) would cost more than its compile.
MAX_ELEMENTS = 1 << 24

_lock = threading.RLock()
_depth = 0
_saved: tuple[dict[str, Any], Any, dict[str, Any], dict[str, Any]] = ({}, None, {}, {})


def bucket(n: int) -> int:
    """The element count a draw of ``n`` elements is made at: the next power of two."""
    return 1 << max(0, n - 1).bit_length()


class HostDraw(np.ndarray):
    """A float32 draw on the host, handed to jax's initialisers only, whose one use of it
    is ``draw * scale``: that product is computed by numpy and comes back as a
    ``jax.Array``, what the initialiser returned before (a scale that is not a float32
    scalar makes the draw a ``jax.Array`` first: jax's own multiply)."""

    def __mul__(self, other: Any) -> Any:
        return _times(self, other)

    def __rmul__(self, other: Any) -> Any:
        return _times(self, other)


def _times(draw: HostDraw, other: Any) -> Any:
    jax = import_jax()
    plain = draw.view(np.ndarray)
    if np.ndim(other) == 0 and not isinstance(other, jax.core.Tracer):
        scalar = other if isinstance(other, (int, float)) else np.asarray(other)
        if isinstance(scalar, (int, float)) or scalar.dtype == plain.dtype:
            product = np.multiply(plain, scalar)
            if product.dtype == plain.dtype:
                return jax.device_put(product)
    return jax.device_put(plain) * other


def _shape(shape: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):  # a symbolic or traced dimension: jax's own path
        return None


def _scalar(value: Any) -> bool:
    jax = import_jax()
    return np.ndim(value) == 0 and not isinstance(value, jax.core.Tracer)


def _host_draw(original: Callable[..., Any], name: str, args: tuple[Any, ...],  # noqa: C901
               kwargs: dict[str, Any]) -> np.ndarray | None:
    """The draw ``original(*args, **kwargs)`` made at its bucket, on the host; None where
    the bucket would not give the same bits (then the caller asks jax as before)."""
    jax = import_jax()
    from jax._src import core

    if not core.trace_state_clean():  # inside a trace: a draw stays an op, not a constant
        return None
    params = dict(kwargs)
    names: tuple[str, ...]
    if name == "truncated_normal":
        names = ("key", "lower", "upper", "shape", "dtype", "out_sharding")
    else:
        names = ("key", "shape", "dtype") + (("minval", "maxval") if name == "uniform" else ())
        names += ("out_sharding",)
    if len(args) > len(names):
        return None
    for arg_name, value in zip(names, args, strict=False):
        if arg_name in params:
            return None
        params[arg_name] = value
    if set(params) - set(names) or params.get("out_sharding") is not None:
        return None
    key = params.get("key")
    if key is None or isinstance(key, jax.core.Tracer):
        return None
    try:
        if "threefry" not in str(jax.random.key_impl(key)) or np.ndim(key) != (
                0 if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else 1):
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    shape = _shape(params.get("shape", ()))
    dtype = params.get("dtype")
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(float if dtype is None else dtype))
    if shape is None or dtype != np.float32:
        return None
    if not all(_scalar(params[k]) for k in ("lower", "upper", "minval", "maxval") if k in params):
        return None
    n = int(np.prod(shape, dtype=np.int64))
    if not 0 < n <= MAX_ELEMENTS:
        return None
    params.pop("out_sharding", None)
    params["shape"], params["dtype"] = (bucket(n),), dtype
    drawn = np.asarray(original(**params))
    return drawn[:n].reshape(shape)


def _public(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``jax.random.<name>`` served from a bucket: the same ``jax.Array``, on the default
    device as an eager op's result is."""
    def draw(*args: Any, **kwargs: Any) -> Any:
        host = _host_draw(original, name, args, kwargs)
        if host is None:
            return original(*args, **kwargs)
        return import_jax().device_put(host)

    draw.__wrapped__ = original  # type: ignore[attr-defined]
    return draw


def _filled(original: Callable[..., Any], value: int) -> Callable[..., Any]:
    """``jax.numpy.zeros``/``ones`` made by numpy and put on the default device: no program
    per shape (0 and 1 are exact in every dtype)."""
    def fill(*args: Any, **kwargs: Any) -> Any:
        jax = import_jax()
        from jax._src import core

        params = dict(zip(("shape", "dtype"), args, strict=False))
        if len(args) > 2 or set(params) & set(kwargs) or not core.trace_state_clean():
            return original(*args, **kwargs)
        params.update(kwargs)
        if any(params.pop(k, None) is not None for k in ("device", "out_sharding")):
            return original(*args, **kwargs)
        shape = _shape(params.pop("shape")) if "shape" in params else None
        dtype = params.pop("dtype", None)
        if params or shape is None or not 0 < int(np.prod(shape, dtype=np.int64)) <= MAX_ELEMENTS:
            return original(*args, **kwargs)
        try:
            dtype = np.dtype(jax.dtypes.canonicalize_dtype(float if dtype is None else dtype))
        except TypeError:
            return original(*args, **kwargs)
        if dtype.kind not in "biufc":  # a PRNG key, a string: jax's own
            return original(*args, **kwargs)
        return jax.device_put(np.full(shape, value, dtype))

    fill.__wrapped__ = original  # type: ignore[attr-defined]
    return fill


class _InitRandom:
    """What jax's initialisers module sees as ``random`` inside :func:`host_init`: the draws
    as :class:`HostDraw`, everything else jax's own."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        original = getattr(self._module, name)
        if name not in DRAWS:
            return original

        def draw(*args: Any, **kwargs: Any) -> Any:
            host = _host_draw(original, name, args, kwargs)
            return original(*args, **kwargs) if host is None else host.view(HostDraw)

        return draw


@contextlib.contextmanager
def host_init() -> Iterator[bool]:
    """Within it, building a model compiles its random draws once per size bucket (see the
    module's text); yields whether it does (False: jax's PRNG is not partitionable here,
    so everything runs as without it).

    What changes, while it is open, in this process: ``jax.random.normal``, ``uniform`` and
    ``truncated_normal``, the ``random`` that ``jax.nn.initializers`` (and so flax's)
    call, and ``jax.numpy.zeros``/``ones`` (made by numpy, put on the device). Every
    caller gets what it got before (the same values, dtypes and ``jax.Array`` type, on
    the same default device), in any thread, so another thread drawing meanwhile is not
    affected; opening it twice (nested or from two threads) is safe (the first to open
    patches, the last to close restores). Use it around a real build only: under
    ``nnx.eval_shape`` or a trace every call goes to jax unchanged anyway.
    """
    global _depth, _saved
    jax = import_jax()
    if not jax.config.jax_threefry_partitionable:
        yield False
        return
    try:  # jax's private modules: where a release moved them, build as without it
        from jax._src import numpy as jax_numpy
        from jax._src import random as jax_random
        from jax._src.nn import initializers as jax_init

        jax_init.random  # noqa: B018 - the attribute the initialisers draw from
    except (ImportError, AttributeError):
        yield False
        return

    with _lock:
        if _depth == 0:
            _saved = ({name: getattr(jax.random, name) for name in DRAWS}, jax_init.random,
                      {name: getattr(jax.numpy, name) for name in FILLS},
                      {name: getattr(jax_numpy, name) for name in FILLS})
            for name, original in _saved[0].items():
                setattr(jax.random, name, _public(original, name))
            for module, fns in ((jax.numpy, _saved[2]), (jax_numpy, _saved[3])):
                for name, original in fns.items():
                    setattr(module, name, _filled(original, FILLS[name]))
            jax_init.random = _InitRandom(jax_random)  # type: ignore[assignment]
        _depth += 1
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, fn in _saved[0].items():
                    setattr(jax.random, name, fn)
                jax_init.random = _saved[1]
                for module, fns in ((jax.numpy, _saved[2]), (jax_numpy, _saved[3])):
                    for name, fn in fns.items():
                        setattr(module, name, fn)
