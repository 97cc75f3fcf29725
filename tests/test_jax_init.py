"""JAX model builds under ``host_init``: the same state, bit for bit, from fewer XLA programs.

Every JAX workload but Inception is built at tiny size twice in this process, first with the context
(so it pays the programs both builds share: key folding, scalar conversions), then as
before; the builds' states must agree leaf by leaf (tree, type, dtype, weak type,
commitment, bits). Programs are counted by jax's own monitoring event for each program
it lowers (a persistent-cache hit still lowers), so no clock is involved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from accelbench.workloads import get_implementation, implementation_frameworks, list_workloads

pytest.importorskip("jax")
pytest.importorskip("flax")

from accelbench.backends.jax.hostinit import bucket, host_init  # noqa: E402
from accelbench.backends.jax.runtime import import_jax  # noqa: E402

jax = import_jax()

LOWERED = "/jax/core/compile/jaxpr_to_mlir_module_duration"
# Every JAX workload but tiny Inception, whose build as before alone lowers 104 programs (a
# minute of a busy CI machine); its parameters are of the kinds these cover (convolutions
# with BatchNorm: resnet50, deepspeech2). ResNet-50 first: the most parameter shapes left,
# counted before other builds share programs.
WORKLOADS = sorted((w.name for w in list_workloads()
                    if "jax" in implementation_frameworks(w.name) and w.name != "inception_v3"),
                   key=lambda name: (name != "resnet50", name))


class Lowered:
    """Counts the XLA programs jax lowers while it is open."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: str, _duration: float, **_kwargs: Any) -> None:
        if event == LOWERED:
            self.count += 1

    def __enter__(self) -> Lowered:
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self)


def build(name: str, fast: bool) -> tuple[Any, int]:
    from flax import nnx

    impl = get_implementation(name, "jax")
    with Lowered() as lowered:
        if fast:
            with host_init() as on:
                assert on
                model = impl.build_model("tiny", nnx.Rngs(0))
        else:
            model = impl.build_model("tiny", nnx.Rngs(0))
    return nnx.state(model), lowered.count


def leaf_facts(x: Any) -> tuple[Any, ...]:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        bits = np.asarray(jax.random.key_data(x))
    else:
        bits = np.asarray(x)
    return type(x), x.dtype, x.shape, getattr(x, "weak_type", None), x.committed, bits


@pytest.fixture(scope="module")
def builds() -> Iterator[dict[str, tuple[Any, int, Any, int]]]:
    out = {}
    for name in WORKLOADS:
        fast, fast_count = build(name, True)
        slow, slow_count = build(name, False)
        out[name] = (fast, fast_count, slow, slow_count)
    yield out


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_state_is_the_same_bits(builds: dict[str, Any], workload: str) -> None:
    fast, _, slow, _ = builds[workload]
    fast_leaves, fast_tree = jax.tree.flatten_with_path(fast)
    slow_leaves, slow_tree = jax.tree.flatten_with_path(slow)
    assert fast_tree == slow_tree
    assert fast_leaves, "a model without parameters proves nothing"
    for (path, a), (_, b) in zip(fast_leaves, slow_leaves, strict=True):
        fa, fb = leaf_facts(a), leaf_facts(b)
        assert fa[:5] == fb[:5], jax.tree_util.keystr(path)
        assert np.array_equal(fa[5], fb[5]), jax.tree_util.keystr(path)


def test_the_builds_lower_fewer_programs(builds: dict[str, Any]) -> None:
    counts = {name: (fast, slow) for name, (_, fast, _, slow) in builds.items()}
    fast, slow = counts["resnet50"]
    assert fast * 2 <= slow, counts  # measured: 18 against 55 (tiny Inception: 15 against 104)
    assert sum(f for f, _ in counts.values()) * 2 <= sum(s for _, s in counts.values()), counts


def test_it_restores_everything_and_nests() -> None:
    from jax._src import numpy as jax_numpy
    from jax._src.nn import initializers

    before = (jax.random.normal, jax.random.uniform, jax.random.truncated_normal,
              initializers.random, jax.numpy.zeros, jax.numpy.ones, jax_numpy.zeros)
    with host_init(), host_init():
        assert jax.random.normal is not before[0]
    assert (jax.random.normal, jax.random.uniform, jax.random.truncated_normal,
            initializers.random, jax.numpy.zeros, jax.numpy.ones, jax_numpy.zeros) == before


def test_draws_and_constants_are_the_same_bits_and_fall_back_where_needed() -> None:
    key = jax.random.key(3)
    calls = [
        lambda: jax.random.normal(key, (3, 5)),
        lambda: jax.random.uniform(key, (7,), minval=-2.0, maxval=0.5),
        lambda: jax.random.truncated_normal(key, -2, 2, (2, 3, 4)),
        lambda: jax.random.normal(key, (4,), jax.numpy.bfloat16),  # not float32: jax's own
        lambda: jax.random.uniform(key, (2, 3), maxval=jax.numpy.arange(1.0, 4.0)),  # broadcasts
        lambda: jax.jit(lambda k: jax.random.normal(k, (6,)))(key),  # traced key
        lambda: jax.nn.initializers.lecun_normal()(key, (3, 4, 5, 6)),
        lambda: jax.nn.initializers.normal(0.02)(key, (9,)),
        lambda: jax.nn.initializers.glorot_uniform()(key, (5, 7)),
        lambda: jax.numpy.zeros((3, 4)),
        lambda: jax.numpy.ones((2, 3), dtype=bool),
        lambda: jax.numpy.ones(5, jax.numpy.int32),  # an int shape: jax's own
        lambda: jax.numpy.zeros((0, 2)),
        lambda: jax.numpy.ones((3,), jax.numpy.bfloat16),
        lambda: jax.nn.initializers.zeros(key, (4, 2)),
        lambda: jax.jit(lambda: jax.numpy.ones((2, 2)))(),  # inside a trace
    ]
    expected = [leaf_facts(call()) for call in calls]
    with host_init():
        got = [leaf_facts(call()) for call in calls]
    for want, have in zip(expected, got, strict=True):
        assert want[:5] == have[:5]
        assert np.array_equal(want[5], have[5])


def test_without_a_partitionable_prng_it_changes_nothing() -> None:
    saved = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", False)
    try:
        original = jax.random.normal
        with host_init() as on:
            assert not on
            assert jax.random.normal is original
    finally:
        jax.config.update("jax_threefry_partitionable", saved)


@pytest.mark.parametrize(("n", "size"), [(1, 1), (2, 2), (3, 4), (64, 64), (65, 128)])
def test_a_bucket_is_the_next_power_of_two(n: int, size: int) -> None:
    assert bucket(n) == size
