"""``--phases`` for JAX: the training step as three compiled pieces (:class:`JaxPhaseSteps`,
the backend's :class:`~accelbench.backends.base.PhaseSteps`).

The measured step is one jitted, donated ``train_step``; XLA fuses across what would be
phase boundaries, so a phase cannot be timed inside it. The pieces are jitted from the same
functions (:class:`~accelbench.backends.jax.trainfns.TrainFns`: the loss with its precision
casts and loss scale, the optimizer update with its fp16 unscale and check), on the step's
own state and batch:

1. **forward**: ``jax.vjp`` of the loss; returns the loss, the new non-parameter state and
   the vjp function, a pytree (``jax._src.api.VJP``) whose leaves are the residuals the
   backward needs: the graph training builds.
2. **backward**: the vjp applied to the scaled loss's cotangent (1.0): the gradients.
3. **optimizer**: ``tx.update`` + ``optax.apply_updates`` (and the fp16 loss-scale unscale,
   finiteness check and scale update).

Each piece is lowered and compiled on first use (``compile_s`` per piece), never while the
case is built: a case without ``--phases`` pays nothing. The pieces are not donated: the
loops run on the step's current state, which the headline step (donating) still needs.
Their sum exceeds the fused step by the fusion and the buffer reuse XLA loses at the two
boundaries, and by the two extra dispatches and waits.

On a one-process mesh (``--devices N``/``--parallel``: the step's ``shardings``) each
piece is jitted with the step's own ``NamedSharding`` trees: its inputs as the step takes
them, the gradients as the parameters, and the optimizer piece's new state held to the
step's out shardings, so the compiled step takes it next as it takes its own. The collectives GSPMD
inserts then run inside each piece, and the phase times include them;
:attr:`JaxPhaseSteps.communication_note` says so (the ``communication`` phase is an
unavailable figure with that reason, never 0), with the collectives XLA put in the step's
program counted by kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from accelbench.backends.jax.runtime import import_jax

METHOD = ("compiled pieces (forward with residuals: jax.vjp of the loss; backward: the vjp "
          "applied to the loss's cotangent; optimizer: the optax update with the loss-scale "
          "check) timed with block_until_ready between them; the measured step is one "
          "compiled step, so the pieces' sum also holds the fusion XLA loses at the phase "
          "boundaries")

#: Input copies of the ``input`` loop queued before the oldest is waited for.
COPIES_IN_FLIGHT = 4

#: XLA's collective ops, as they appear in a compiled program's HLO text.
XLA_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                   "collective-permute")

COMMUNICATION_NOTE = ("inside each piece (GSPMD), not timed apart: XLA runs the mesh's "
                      "collectives inside the forward, backward and optimizer executions, "
                      "whose times include them (timing them apart needs a jax.profiler "
                      "trace)")


def collective_counts(hlo: str) -> dict[str, int]:
    """Each XLA collective's ops in a compiled program's HLO text (an asynchronous one
    counted once, by its ``-start``)."""
    import re

    return {c: len(re.findall(rf" {c}(?:-start)?\(", hlo)) for c in XLA_COLLECTIVES}


def _first_leaf(tree: Any) -> Any:
    """One output array of an execution: all outputs of one XLA execution become ready
    together, so waiting for one waits for all, without walking the tree."""
    return import_jax().tree.leaves(tree)[0]


class JaxPhaseSteps:
    """The compiled pieces of one :class:`~accelbench.backends.jax.backend.JaxTrainStep`.

    Args:
        step: The case's step; the pieces read its ``state``, ``batch``, ``fns`` and
            ``matmul_precision``, and :meth:`timed_step` advances its ``state``.
    """

    method = METHOD

    def __init__(self, step: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self._step = step
        self.clock = clock
        """What :meth:`timed_step` reads: the host's wall clock (a test may read the
        process's CPU time instead, which a busy machine's scheduling does not stretch)."""
        self._pieces: dict[str, Any] = {}
        self.compile_s: dict[str, float] = {}
        """Seconds to lower and compile each piece (``forward``, ``backward``,
        ``optimizer``), filled on first use."""
        self._pending: list[Any] = []
        self._copies: list[Any] = []

    # -- the pieces -------------------------------------------------------------------

    def _forward_fn(self, params: Any, rest: Any, scale: Any, batch: Any
                    ) -> tuple[Any, Any, Any]:
        jax = import_jax()
        fns = self._step.fns

        def loss_of(p: Any) -> tuple[Any, tuple[Any, Any]]:
            return fns.loss(p, rest, scale, batch)

        _, vjp, (loss, new_rest) = jax.vjp(loss_of, params, has_aux=True)
        sh = getattr(self._step, "shardings", None)
        if sh is not None:  # a mesh: the loss and new state as the step returns them
            whole, r_sh = sh[5], sh[1]
            loss = jax.lax.with_sharding_constraint(loss, whole)
            new_rest = jax.lax.with_sharding_constraint(new_rest, r_sh)
        return loss, vjp, new_rest

    @staticmethod
    def _backward_fn(vjp: Any) -> Any:
        import jax.numpy as jnp

        (grads,) = vjp(jnp.ones((), jnp.float32))  # d(scaled loss) = 1, as jax.grad seeds
        return grads

    def _optimizer_fn(self, grads: Any, params: Any, rest: Any, new_rest: Any,
                      opt_state: Any, scale: Any) -> tuple[Any, Any, Any, Any]:
        return self._step.fns.update(
            grads, params, rest, new_rest, opt_state, scale)

    def _grad_fn(self, params: Any, rest: Any, scale: Any, batch: Any) -> Any:
        """Forward and backward as the measured step computes them: one ``jax.grad``,
        compiled as one execution (the differential loop's ``forward_backward``)."""
        jax = import_jax()
        fns = self._step.fns

        def loss_of(p: Any) -> tuple[Any, tuple[Any, Any]]:
            return fns.loss(p, rest, scale, batch)

        grads, _aux = jax.grad(loss_of, has_aux=True)(params)
        return grads

    def _on_mesh(self, name: str) -> dict[str, Any]:
        """``jax.jit``'s in and out shardings of piece ``name`` on a mesh (none on one
        device): the step's, so that the pieces take and return what the step does."""
        sh = getattr(self._step, "shardings", None)
        if sh is None:
            return {}
        p_sh, r_sh, o_sh, s_sh, b_sh, _whole = sh
        if name in ("forward", "forward_backward"):
            return {"in_shardings": (p_sh, r_sh, s_sh, b_sh),
                    **({"out_shardings": p_sh} if name == "forward_backward" else {})}
        if name == "backward":  # the residuals come as the forward piece left them
            return {"out_shardings": p_sh}
        # optimizer: (grads, params, rest, new_rest, opt_state, scale) -> the new state
        return {"in_shardings": (p_sh, p_sh, r_sh, r_sh, o_sh, s_sh),
                "out_shardings": (p_sh, r_sh, o_sh, s_sh)}

    @property
    def communication_note(self) -> str | None:
        """On a mesh of several devices: why the ``communication`` phase has no figure,
        with the collectives XLA put in the compiled step; None on one device."""
        mesh = getattr(self._step, "mesh", None)
        if mesh is None or mesh.size < 2:
            return None
        compiled = getattr(self._step, "_compiled", None)
        try:
            counts = collective_counts(compiled.as_text()) if compiled is not None else None
        except Exception:  # noqa: BLE001 - a platform without the program's text
            counts = None
        held = ("; the compiled step holds " + ", ".join(
            f"{n} {c}" for c, n in counts.items() if n) if counts and any(counts.values())
            else "; the compiled step holds no collective" if counts is not None else "")
        return COMMUNICATION_NOTE + held

    def _run(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run piece ``name``, lowering and compiling it first if this is its first use."""
        piece = self._pieces.get(name)
        if piece is None:
            jax = import_jax()
            t0 = time.perf_counter()
            with jax.default_matmul_precision(self._step.matmul_precision):
                piece = jax.jit(fn, **self._on_mesh(name)).lower(*args).compile()
            self.compile_s[name] = time.perf_counter() - t0
            self._pieces[name] = piece
        return piece(*args)

    def _forward(self) -> tuple[Any, Any, Any]:
        params, rest, _, scale = self._step.state
        return self._run(
            "forward", self._forward_fn, params, rest, scale, self._step.batch)

    def _backward(self, vjp: Any) -> Any:
        return self._run("backward", self._backward_fn, vjp)

    def _optimizer(self, grads: Any, new_rest: Any) -> tuple[Any, Any, Any, Any]:
        params, rest, opt_state, scale = self._step.state
        return self._run(
            "optimizer", self._optimizer_fn, grads, params, rest, new_rest, opt_state, scale)

    def prepare(self) -> None:
        """Compile every piece (once) and run each once, untimed, leaving the state as it
        was: the first execution's allocations stay out of the timings."""
        if all(name in self._pieces for name in ("forward", "backward", "optimizer")):
            return
        loss, vjp, new_rest = self._forward()
        grads = self._backward(vjp)
        new = self._optimizer(grads, new_rest)
        import_jax().block_until_ready((loss, _first_leaf(grads), _first_leaf(new[0])))

    # -- PhaseSteps ---------------------------------------------------------------------

    def timed_step(self) -> dict[str, float]:
        """One training step through the three pieces, waiting for the device after each;
        the step's state advances as the fused step would advance it."""
        self.prepare()
        step, clock = self._step, self.clock
        t0 = clock()
        loss, vjp, new_rest = self._forward()
        loss.block_until_ready()
        t1 = clock()
        grads = self._backward(vjp)
        _first_leaf(grads).block_until_ready()
        t2 = clock()
        new = self._optimizer(grads, new_rest)
        _first_leaf(new[0]).block_until_ready()
        t3 = clock()
        step.state = new
        step.last_loss = loss
        return {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2}

    def loops(self) -> dict[str, Callable[[], None]]:
        """``forward`` (piece 1, its outputs dropped), ``forward_backward`` (the step's
        gradients as one fused execution, dropped: pieces 1 and 2 run apart would lose the
        fusion the step has, and the optimizer's difference would come out negative):
        neither changes the state; ``step``: the measured compiled step itself, which
        trains (advances the state)."""
        self.prepare()
        self._forward_backward_loop()  # compiled and run once here, not inside a trial
        self.synchronize()
        return {"forward": self._forward_loop, "forward_backward": self._forward_backward_loop,
                "step": self._step.step}

    def _forward_loop(self) -> None:
        loss, _, _ = self._forward()
        self._queued(loss)

    def _queued(self, out: Any) -> None:
        """Keep one output of a loop's iteration for :meth:`synchronize`; on a CPU mesh
        (the step's ``serial``) wait for it now: queued executions deadlock XLA:CPU's
        collectives."""
        if getattr(self._step, "serial", False):
            out.block_until_ready()
        self._pending.append(out)

    def _forward_backward_loop(self) -> None:
        params, rest, _, scale = self._step.state
        grads = self._run("forward_backward", self._grad_fn, params, rest, scale,
                          self._step.batch)
        self._queued(_first_leaf(grads))

    def synchronize(self) -> None:
        """Wait for every iteration queued since the last call (one scalar or leaf of each
        is kept), the input copies and the step's last loss."""
        waiting = [*self._pending, *self._copies, self._step.last_loss]
        import_jax().block_until_ready([w for w in waiting if w is not None])
        self._pending.clear()
        self._copies.clear()

    def input_copy(self) -> Callable[[], None] | None:
        """None on a CPU (the batch is made in the memory it trains from); elsewhere one
        ``jax.device_put`` of a host (numpy) copy of the case's batch to its device. At most
        :data:`COPIES_IN_FLIGHT` copies are held until :meth:`synchronize` (a further copy
        first waits for the oldest), so a long loop never holds a batch per iteration."""
        step = self._step
        if step.device.platform == "cpu":
            return None
        jax = import_jax()
        host = jax.device_get(step.batch)
        sh = getattr(step, "shardings", None)
        device = step.device if sh is None else sh[4]  # a mesh: the batch's shardings

        def copy() -> None:
            if len(self._copies) >= COPIES_IN_FLIGHT:
                jax.block_until_ready(self._copies.pop(0))
            self._copies.append(jax.device_put(host, device))

        return copy
