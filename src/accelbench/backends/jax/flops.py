"""FLOPs per sample of a JAX workload implementation, by walking the step's jaxpr.

The same convention as the torch counter (``torch.utils.flop_counter``), so
that both frameworks report the same FLOPs for the same model: matrix
multiplies (``dot_general``) and convolutions (``conv_general_dilated``) count
2 FLOPs per multiply-add, elementwise work, normalisation and losses count 0.
The input gradient of a strided convolution is a convolution over a dilated
(zero-filled) input; only the multiply-adds that touch real values count.
The forward count traces the loss; the training count traces
``jax.value_and_grad`` of it with respect to the parameters, so backward
counts what autodiff actually runs (no gradient for the input batch).
Tracing uses abstract shapes only: nothing is allocated or computed.

Sub-computations are followed: ``pjit``/``remat``/custom derivative calls
once, ``scan`` bodies times their length, the costlier branch of a ``cond``;
a ``while`` loop's trip count is unknown, so its body counts once.

A workload with an analytic count (``Workload.analytic_flops``: the
transformers) records that figure instead, with the walk's kept in ``method``
and ``by_operator`` as the cross-check.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from accelbench.backends.base import FlopCount
from accelbench.backends.jax.runtime import split_state
from accelbench.workloads.analytic import with_analytic


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in v.aval.shape)


def _dot_flops(eqn: Any) -> int:
    (lhs_contract, _rhs_contract), _batch = eqn.params["dimension_numbers"]
    lhs = _shape(eqn.invars[0])
    out = _shape(eqn.outvars[0])
    return 2 * math.prod(out) * math.prod(lhs[i] for i in lhs_contract)


def _conv_flops(eqn: Any) -> int:
    dn = eqn.params["dimension_numbers"]
    rhs = _shape(eqn.invars[1])
    out = _shape(eqn.outvars[0])
    # rhs_spec = (out feature dim, in feature dim, *spatial dims) of the kernel.
    rhs_spec = dn.rhs_spec
    in_features = rhs[rhs_spec[1]]
    window = math.prod(rhs[i] for i in rhs_spec[2:])
    # A dilated input (the input gradient of a strided conv) is mostly inserted zeros:
    # only 1 / prod(lhs_dilation) of the window's multiply-adds touch real values.
    holes = math.prod(eqn.params.get("lhs_dilation") or (1,))
    return 2 * math.prod(out) * in_features * window // holes


def _sub_jaxprs(eqn: Any) -> Iterator[tuple[Any, int]]:
    """(jaxpr, multiplicity) of every sub-computation of ``eqn``."""
    name = eqn.primitive.name
    params = eqn.params
    if name == "scan":
        yield params["jaxpr"], int(params["length"])
        return
    if name == "cond":
        return  # handled by the caller (the costlier branch)
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr", "body_jaxpr"):
        sub = params.get(key)
        if sub is not None and (hasattr(sub, "eqns") or hasattr(sub, "jaxpr")):
            yield sub, 1


def _inner(jaxpr: Any) -> Any:
    return jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") and not hasattr(jaxpr, "eqns") else jaxpr


def count_jaxpr(jaxpr: Any, into: dict[str, float] | None = None, times: int = 1
                ) -> dict[str, float]:
    """FLOPs of ``jaxpr`` by primitive (``dot_general``, ``conv_general_dilated``)."""
    out: dict[str, float] = {} if into is None else into
    for eqn in _inner(jaxpr).eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            out[name] = out.get(name, 0.0) + times * _dot_flops(eqn)
        elif name == "conv_general_dilated":
            out[name] = out.get(name, 0.0) + times * _conv_flops(eqn)
        elif name == "cond":
            branches = [count_jaxpr(b) for b in eqn.params["branches"]]
            best = max(branches, key=lambda d: sum(d.values()), default={})
            for k, v in best.items():
                out[k] = out.get(k, 0.0) + times * v
        else:
            for sub, n in _sub_jaxprs(eqn):
                count_jaxpr(sub, out, times * n)
    return out


def count_flops(impl: Any, size: str, batch_size: int) -> FlopCount:
    """Count one forward and one training step of ``impl`` at ``batch_size`` (abstractly).

    Raises:
        ConfigError: an invalid batch size.
    """
    import jax
    from flax import nnx

    workload = impl.workload
    workload.check_size(size)
    workload.validate_batch_size(size, batch_size)
    model = nnx.eval_shape(lambda: impl.build_model(size, nnx.Rngs(0)))
    graphdef, params, rest = split_state(model)
    batch = jax.eval_shape(lambda k: impl.make_batch(size, batch_size, k), jax.random.key(0))

    def loss(p: Any, r: Any, b: Any) -> Any:
        return impl.loss(nnx.merge(graphdef, p, r, copy=True), b)

    fwd = count_jaxpr(jax.make_jaxpr(loss)(params, rest, batch))
    train = count_jaxpr(jax.make_jaxpr(jax.value_and_grad(loss))(params, rest, batch))
    forward, total = sum(fwd.values()), sum(train.values())
    counted = FlopCount(
        workload=workload.name,
        size=size,
        batch_size=batch_size,
        forward_flop_per_sample=forward / batch_size,
        train_flop_per_sample=total / batch_size,
        method="jaxpr",
        device="abstract",
        by_operator=tuple(sorted(((k, v / batch_size) for k, v in train.items()),
                                 key=lambda kv: -kv[1])),
        param_count=int(sum(x.size for x in jax.tree.leaves(params))),
    )
    # The transformers' record FLOPs are the analytic (PaLM) count; the walk is the check.
    return with_analytic(counted, workload.analytic_flops(size, batch_size))
