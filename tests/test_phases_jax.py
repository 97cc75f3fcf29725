"""The JAX backend's real step (``JaxTrainStep``) for every JAX workload at tiny size on
the CPU, in-process: it trains, and ``--phases``' compiled pieces (``backends/jax/phases.py``)
train as it does.

One step a workload is built for the module (``--dist loadfile`` keeps the file on one
worker; tiny Inception's step costs 20-45 s to build here, so it is built once for all of
these tests); each piece is compiled once. Timing assertions compare the pieces with the
fused step measured alternately, in the same process, on medians, with the margin the
product itself stores (``accelbench.phases.SUM_TOLERANCE_REL``) or the documented wider one.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelbench.backends import get_backend
from accelbench.backends.base import PhaseSteps, phase_steps_of
from accelbench.phases import SUM_TOLERANCE_REL
from accelbench.spec import RunSpec
from accelbench.workloads import (
    get_implementation,
    get_workload,
    implementation_frameworks,
    list_workloads,
)
from tests.conftest import run_cli, train_losses

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

JAX_WORKLOADS = [w.name for w in list_workloads() if "jax" in implementation_frameworks(w.name)]
PHASES = ("forward", "backward", "optimizer")
#: The pieces' sum / the fused step, both in process CPU time. Not the record's 10%: each
#: piece is its own XLA execution, which writes its outputs (residuals, gradients, a new
#: state) instead of fusing across the boundary and reusing buffers, and dispatches once
#: more. At tiny size on a CPU that is 1.1x (deepspeech2) to 1.7x (llm) of the step with
#: the tests' XLA flags, 1.1x to 2.3x (lstm) with XLA's optimisations
#: (ACCELBENCH_TEST_XLA_OPT=1; docs/architecture.md, "JAX --phases"), and 2.84 (bert) in a
#: full run of the suite whose neighbours kept both cores busy (its fused step's CPU time
#: fell in two groups, 2.6 and 4.5 ms); below 0.9 a piece would be missing work, far
#: above it a compile (100x a step) or several steps would be in the timing.
SUM_RATIO_RANGE = (0.9, 3.5)


def _build(workload: str, precision: str = "fp32") -> Any:
    spec = RunSpec(workload=workload, size="tiny", framework="jax", precision=precision,
                   batch_size=get_workload(workload).default_batch_sizes["tiny"][0])
    return get_backend("jax").build_step(spec, get_implementation(workload, "jax"))


@pytest.fixture(scope="module", params=JAX_WORKLOADS)
def built(request: pytest.FixtureRequest) -> Any:
    """The workload's real JaxTrainStep (fp32), shared by this module's tests."""
    return _build(request.param)


def test_the_step_trains_at_tiny_size(built: Any) -> None:
    """The backend's real jitted step on the CPU, from its initial state (the first test
    on each workload's step): the loss falls over a few steps of the same batch."""
    step = built
    workload = step.spec.workload
    assert step.compile_s is not None and step.compile_s > 0
    assert step.param_count == get_backend("torch").param_count(
        get_implementation(workload, "torch"), "tiny")
    losses = train_losses(step, 8)
    # The same batch every step: the model must fit it.
    assert min(losses[-3:]) < losses[0], losses
    xla = step.extra().get("xla_flop_per_sample")
    assert xla is None or xla > 0


# The pieces' logic is the same for every model; Inception's three pieces alone cost 23 s
# to compile here, and its layers (convolutions, BatchNorm, pooling) are resnet50's.
PIECES_WORKLOADS = [w for w in JAX_WORKLOADS if w != "inception_v3"]
pieces_of = pytest.mark.parametrize("built", PIECES_WORKLOADS, indirect=True)


def _host(tree: Any) -> Any:
    return jax.device_get(tree)


def _restore(step: Any, saved: Any) -> None:
    step.state = jax.device_put(saved, step.device)


def _key_data(x: Any) -> Any:
    """A dropout rng key (in the models' state) as its integers."""
    is_key = jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    return jax.random.key_data(x) if is_key else x


def _assert_trees(a: Any, b: Any, *, exact: bool = False, rtol: float = 1e-5,
                  atol: float = 1e-6) -> None:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb, strict=True):
        x, y = np.asarray(_key_data(x)), np.asarray(_key_data(y))
        assert x.dtype == y.dtype and x.shape == y.shape
        if exact or not np.issubdtype(x.dtype, np.floating):
            assert np.array_equal(x, y)
        else:
            np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64),
                                       rtol=rtol, atol=atol)


def _one_fused_step(step: Any, clock: Any = time.perf_counter) -> float:
    t0 = clock()
    step.step()
    step.synchronize()
    return clock() - t0


@pieces_of
def test_pieces_compile_lazily_and_train_as_the_fused_step(built: Any) -> None:
    """From one state, a step through the three pieces and a step of the measured compiled
    step give the same loss and the same new state (parameters, BatchNorm statistics and
    dropout counters, optimizer state)."""
    step = built
    pieces = phase_steps_of(step)
    assert isinstance(pieces, PhaseSteps) and pieces is step.phase_steps()
    assert "block_until_ready" in pieces.method
    assert pieces.input_copy() is None  # a CPU case: the batch is made where it trains
    step.step()  # a trained state, not the initial one
    step.synchronize()
    saved = _host(step.state)
    assert "forward_backward" not in pieces.compile_s  # the loops' piece: not built yet

    times = pieces.timed_step()
    assert set(PHASES) <= set(pieces.compile_s)
    assert all(v > 0 for v in pieces.compile_s.values())
    assert set(times) == set(PHASES)
    by_pieces, loss_pieces = _host(step.state), step.loss_value()

    _restore(step, saved)
    step.step()
    step.synchronize()
    by_fused, loss_fused = _host(step.state), step.loss_value()
    assert loss_pieces is not None and math.isfinite(loss_pieces)
    assert loss_pieces == pytest.approx(loss_fused, rel=1e-5, abs=1e-6)
    # Not bit-equal: the two compilations may sum in another order (deepspeech2's
    # near-zero leaves differ by ~1e-6).
    _assert_trees(by_pieces, by_fused, rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError):  # the step changed the state: the check can fail
        _assert_trees(saved[0], by_fused[0], exact=True)


@pieces_of
def test_phase_times_are_positive_and_add_up_to_the_step(built: Any) -> None:
    """Forward, backward and optimizer each take time, and their sum is the fused step's
    time within :data:`SUM_RATIO_RANGE`: medians of the two timed alternately, on the
    process's CPU clock (a busy machine's scheduling stretches three waits more than one).
    Up to three rounds: a round on a loaded machine read 6.7 once (fused steps of 0.3-2.7
    ms on the CPU clock), while a wrong sum (a phase counted twice, one missing) is wrong
    in every round."""
    step = built
    pieces = step.phase_steps()
    pieces.prepare()
    for _ in range(2):
        _one_fused_step(step)
        pieces.timed_step()
    rounds = []
    for _ in range(3):
        ratio, split = _sum_ratio(step, pieces)
        for p in PHASES:
            assert statistics.median(split[p]) > 0, p
        rounds.append(ratio)
        if SUM_RATIO_RANGE[0] <= ratio <= SUM_RATIO_RANGE[1]:
            break
    assert SUM_RATIO_RANGE[0] <= rounds[-1] <= SUM_RATIO_RANGE[1], rounds


def _sum_ratio(step: Any, pieces: Any) -> tuple[float, dict[str, list[float]]]:
    """Median sum of the phases over the median fused step, 9 of each timed alternately."""
    fused: list[float] = []
    sums: list[float] = []
    split: dict[str, list[float]] = {p: [] for p in PHASES}
    pieces.clock = time.process_time
    try:
        for _ in range(9):
            fused.append(_one_fused_step(step, time.process_time))
            t = pieces.timed_step()
            for p in PHASES:
                split[p].append(t[p])
            sums.append(sum(t.values()))
    finally:
        pieces.clock = time.perf_counter
    return statistics.median(sums) / statistics.median(fused), split


# The loops' logic is the same for every workload; two (a recurrent and a convolutional
# model) keep the fused gradient's extra compile out of the other seven.
@pytest.mark.parametrize("built", ["lstm", "resnet50"], indirect=True)
def test_step_loop_trains_and_forward_loops_leave_the_state(built: Any) -> None:
    step = built
    pieces = step.phase_steps()
    loops = pieces.loops()
    assert set(loops) == {"forward", "forward_backward", "step"}
    # forward + backward is the step's own fused gradient, compiled when the loops are made
    # (pieces 1 + 2 run apart would lose the fusion the step has: a negative optimizer).
    assert pieces.compile_s["forward_backward"] > 0
    pieces.synchronize()
    saved, loss0 = _host(step.state), step.loss_value()
    for name in ("forward", "forward_backward"):
        for _ in range(3):
            loops[name]()
        pieces.synchronize()
    _assert_trees(_host(step.state), saved, exact=True)
    assert step.loss_value() == loss0
    for _ in range(3):
        loops["step"]()
    pieces.synchronize()
    loss3 = step.loss_value()
    assert loss3 is not None and math.isfinite(loss3)
    # It trains: the loss moves, unless the model already fits its one batch exactly
    # (a tiny model may reach a loss of 0.0 in the steps of the tests before), and the
    # parameters or the optimizer's state move.
    assert loss3 != loss0 or loss0 == 0.0
    with pytest.raises(AssertionError):
        _assert_trees([_host(step.state)[0], _host(step.state)[2]], [saved[0], saved[2]],
                      exact=True)


def test_amp_bf16_pieces_keep_float32_state_and_match_the_fused_step() -> None:
    step = _build("llm", "amp_bf16")  # a cheap compile (resnet50's took 140 s here)
    pieces = step.phase_steps()
    saved = _host(step.state)
    times = pieces.timed_step()
    assert all(times[p] > 0 for p in PHASES)
    by_pieces = _host(step.state)
    assert {x.dtype for x in jax.tree.leaves(by_pieces[:2])} == {np.dtype("float32")}
    _restore(step, saved)
    step.step()
    step.synchronize()
    _assert_trees(by_pieces, _host(step.state), rtol=1e-3, atol=1e-5)


def test_amp_fp16_pieces_scale_the_loss_and_skip_a_non_finite_step_as_the_fused_step() -> None:
    """fp16's dynamic loss scaling in the optimizer piece: a finite step counts a good step
    at the same scale; a scale that overflows the scaled loss skips the update and halves
    the scale, exactly as the fused step does."""
    step = _build("lstm", "amp_fp16")
    pieces = step.phase_steps()
    saved = _host(step.state)
    pieces.timed_step()
    params, _, _, scale = _host(step.state)
    assert float(scale["scale"]) == 2.0**16 and int(scale["good"]) == 1
    with pytest.raises(AssertionError):
        _assert_trees(params, saved[0], exact=True)

    huge = dict(saved[3], scale=np.float32(3e38))  # loss x scale overflows to inf
    results = []
    for run in (pieces.timed_step, step.step):
        _restore(step, (*saved[:3], huge))
        run()
        step.synchronize()
        results.append(_host(step.state))
    for params, _rest, opt_state, scale in results:
        _assert_trees(params, saved[0], exact=True)  # the step was skipped
        _assert_trees(opt_state, saved[2], exact=True)
        assert float(scale["scale"]) == np.float32(1.5e38) and int(scale["good"]) == 0
    _assert_trees(results[0], results[1], exact=True)


def test_a_one_process_mesh_splits_its_step_and_says_where_communication_is(
        tmp_path: Path) -> None:
    """``--phases`` on 2 host devices under fsdp, through the CLI (the smallest workload
    and batch: XLA's compiles dominate): the pieces keep the step's shardings (else the
    compiled step, run by the loops after the pieces trained, refuses their state and the
    pass fails), the shares of the in-step phases add up, a step is the mesh's global
    batch, and communication is an unavailable figure that says where it runs."""
    from accelbench.backends.jax.phases import COMMUNICATION_NOTE
    from accelbench.execution.phases import phase_samples
    from accelbench.phase_summary import share
    from accelbench.store import open_store

    db = tmp_path / "r.db"
    p = run_cli("run", "llm", "--framework", "jax", "--size", "tiny", "--batch-size", "16",
                "--devices", "2", "--parallel", "fsdp", "--phases", "--iterations", "10",
                "--no-energy", db=db)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "ok", r.error
    ph = r.phases
    assert ph is not None and not any("phase pass failed" in n for n in ph.notes), ph
    assert [x.name for x in ph.phases] == [*PHASES, "communication"]
    in_step = [x for x in ph.phases if x.in_step]
    assert [x.name for x in in_step] == list(PHASES)
    assert all(x.time_s is not None and x.time_s > 0 for x in in_step)
    assert sum(share(x, ph) or 0.0 for x in in_step) == pytest.approx(1.0)
    assert ph.sum_rel_diff is not None and ph.step_time_s == pytest.approx(r.stats.median_s)
    if abs(ph.sum_rel_diff) > SUM_TOLERANCE_REL:
        assert any(n.startswith("the in-step phases' direct times sum to") for n in ph.notes)
    # Samples per step: the global batch (16 tokens per replica x 2 fsdp replicas), in the
    # record and in the phase pass.
    assert r.samples_per_step == 32 == phase_samples(r.spec, None)
    comm = ph.get("communication")
    assert comm is not None and comm.time_s is None and not comm.in_step
    assert share(comm, ph) is None
    assert comm.note.startswith(COMMUNICATION_NOTE) and "all-gather" in comm.note
    assert comm.energy is not None and comm.energy.status == "unavailable"
    assert comm.energy.value is None and comm.energy.note == comm.note
    assert r.backend_extra["sharding"]["axes"] == {"data": 1, "fsdp": 2, "tensor": 1}
