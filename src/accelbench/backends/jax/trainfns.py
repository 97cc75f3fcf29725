"""The functions of JAX's training step, defined once: the loss (the precision casts and
the fp16 loss scale included) and the optimizer update (the fp16 unscale, finiteness check
and scale update included).

:class:`~accelbench.backends.jax.backend.JaxTrainStep` jits their composition,
:meth:`TrainFns.train_step` (amp_fp16) or :meth:`TrainFns.train_step_unscaled` (every other
precision: the scale a constant 1), as its one donated step; ``--phases``
(:mod:`accelbench.backends.jax.phases`) jits :meth:`TrainFns.loss` under ``jax.vjp`` and
:meth:`TrainFns.update` as separate pieces, so both train with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.backends.jax.runtime import import_jax, split_state

#: The dtype each mixed precision computes in (parameters stay float32).
COMPUTE_DTYPE = {"amp_bf16": "bfloat16", "amp_fp16": "float16"}
#: Dynamic loss scaling for amp_fp16 (the GradScaler defaults of PyTorch).
INIT_SCALE = 2.0**16
GROWTH_INTERVAL = 2000


def cast_floats(tree: Any, dtype: Any) -> Any:
    """Every floating leaf of ``tree`` as ``dtype`` (integer leaves as they are)."""
    jax = import_jax()
    import jax.numpy as jnp

    def cast(x: Any) -> Any:
        return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree.map(cast, tree)


@dataclass(frozen=True, eq=False)
class TrainFns:
    """What one case's step computes, as pure functions of its state.

    The state is ``(params, rest, opt_state, scale)``: float32 parameters, the rest of the
    model's state (BatchNorm statistics, dropout rng counters), the optimizer's state and
    the loss scale (``{"scale", "good"}``; 1.0 and never changed unless ``fp16``).
    """

    impl: Any
    """The workload's JAX implementation (its ``loss(model, batch)``)."""
    graphdef: Any
    rest_dtypes: Any
    """The dtype of each leaf of ``rest`` (restored after a mixed-precision step)."""
    compute_dtype: Any
    """bfloat16 / float16 for the mixed precisions, else None."""
    tx: Any
    """The optax optimizer."""
    fp16: bool
    """Dynamic loss scaling (amp_fp16)."""

    def loss(self, params: Any, rest: Any, scale: Any, batch: Any
             ) -> tuple[Any, tuple[Any, Any]]:
        """``(scaled loss, (loss, new rest))``: the function the step differentiates."""
        import jax.numpy as jnp
        from flax import nnx

        p, b = params, batch
        if self.compute_dtype is not None:
            p, b = cast_floats(params, self.compute_dtype), cast_floats(batch, self.compute_dtype)
        # copy=True: the rest of the state (BatchNorm statistics, dropout rng counters) is
        # mutated inside the grad trace.
        m = nnx.merge(self.graphdef, p, rest, copy=True)
        loss = self.impl.loss(m, b).astype(jnp.float32)
        _, _, new_rest = split_state(m)
        return loss * scale["scale"], (loss, new_rest)

    def update(self, grads: Any, params: Any, rest: Any, new_rest: Any, opt_state: Any,
               scale: Any) -> tuple[Any, Any, Any, Any]:
        """The optimizer update from the (scaled) gradients: the new ``(params, rest,
        opt_state, scale)``."""
        jax = import_jax()
        import jax.numpy as jnp
        import optax

        new_rest = jax.tree.map(lambda x, d: x.astype(d), new_rest, self.rest_dtypes)
        if not self.fp16:
            updates, new_opt = self.tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), new_rest, new_opt, scale
        # Dynamic loss scaling: unscale, skip the step on inf/nan and halve the scale,
        # double it after GROWTH_INTERVAL good steps (PyTorch's GradScaler rules).
        grads = jax.tree.map(lambda g: g / scale["scale"], grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        updates, new_opt = self.tx.update(grads, opt_state, params)
        stepped = optax.apply_updates(params, updates)

        def keep(new: Any, old: Any) -> Any:
            return jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)

        good = jnp.where(finite, scale["good"] + 1, 0)
        grow = good >= GROWTH_INTERVAL
        new_scale = {
            "scale": jnp.where(finite, jnp.where(grow, scale["scale"] * 2, scale["scale"]),
                               scale["scale"] / 2),
            "good": jnp.where(grow, 0, good),
        }
        return keep(stepped, params), keep(new_rest, rest), keep(new_opt, opt_state), new_scale

    def train_step(self, params: Any, rest: Any, opt_state: Any, scale: Any, batch: Any
                   ) -> tuple[Any, Any, Any, Any, Any]:
        """One full step: the new ``(params, rest, opt_state, scale)`` and the loss."""
        jax = import_jax()

        def loss_of(p: Any) -> tuple[Any, tuple[Any, Any]]:
            return self.loss(p, rest, scale, batch)

        grads, (loss, new_rest) = jax.grad(loss_of, has_aux=True)(params)
        return (*self.update(grads, params, rest, new_rest, opt_state, scale), loss)

    def train_step_unscaled(self, params: Any, rest: Any, opt_state: Any, batch: Any
                            ) -> tuple[Any, Any, Any, Any]:
        """:meth:`train_step` with the loss scale a constant 1 (every precision but
        amp_fp16, whose scale never changes): the new ``(params, rest, opt_state)`` and the
        loss. The scale is then part of the program, not two buffers more in and out of
        every step: a tiny lstm step on a CPU took 8% longer with them."""
        import jax.numpy as jnp

        one = {"scale": jnp.float32(1.0), "good": jnp.int32(0)}
        params, rest, opt_state, _scale, loss = self.train_step(params, rest, opt_state, one,
                                                                batch)
        return params, rest, opt_state, loss
