"""Harness overhead: accelbench's reported throughput vs a bare hand-written training loop.

Both measure the same model, batch and precision, side by side in one run,
alternating rounds so machine noise hits both alike. The ratio is
accelbench / bare; the target is >= 0.98. With ``--framework jax`` the bare
loop is a plain jitted optax step of the same Flax model.

    python benchmarks/harness_overhead.py --workload resnet50 --size tiny
    python benchmarks/harness_overhead.py --framework jax --workload lstm --size small
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import accelbench
from accelbench.workloads import get_implementation, get_workload


def bare_jax_loop(workload: str, size: str, batch_size: int, precision: str, iterations: int,
                  warmup: int, sync_each_step: bool = True) -> float:
    """A plain jitted JAX/optax training loop, timed end to end; returns samples/s.

    With ``sync_each_step`` it waits for each step as accelbench's protocol does (each
    iteration is timed on its own); without, steps pipeline behind XLA's asynchronous
    dispatch, the fastest a training loop can go.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    impl = get_implementation(workload, "jax")
    model = impl.build_model(size, nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = impl.make_batch(size, batch_size, jax.random.key(0))
    tx = optax.sgd(impl.workload.learning_rate, momentum=0.9)
    opt_state = tx.init(params)
    bf16 = precision == "amp_bf16"

    def cast(tree):  # type: ignore[no-untyped-def]
        return jax.tree.map(
            lambda x: x.astype(jnp.bfloat16) if jnp.issubdtype(x.dtype, jnp.floating) else x,
            tree)

    def loss_fn(p, r, b):  # type: ignore[no-untyped-def]
        if bf16:
            p, b = cast(p), cast(b)
        m = nnx.merge(graphdef, p, r, copy=True)
        loss = impl.loss(m, b)
        return loss, nnx.state(m, nnx.Not(nnx.Param))

    @jax.jit
    def step(p, r, o, b):  # type: ignore[no-untyped-def]
        (loss, new_r), g = jax.value_and_grad(loss_fn, has_aux=True)(p, r, b)
        updates, o = tx.update(g, o, p)
        return optax.apply_updates(p, updates), new_r, o, loss

    with jax.default_matmul_precision("float32" if not bf16 else "default"):
        for _ in range(warmup):
            params, rest, opt_state, loss = step(params, rest, opt_state, batch)
        jax.block_until_ready(loss)
        t0 = time.perf_counter()
        for _ in range(iterations):
            params, rest, opt_state, loss = step(params, rest, opt_state, batch)
            if sync_each_step:
                loss.block_until_ready()
        jax.block_until_ready((params, loss))
    return batch_size * iterations / (time.perf_counter() - t0)


def bare_loop(workload: str, size: str, batch_size: int, precision: str, iterations: int,
              warmup: int) -> float:
    """A plain PyTorch training loop, timed end to end; returns samples/s."""
    wl = get_implementation(workload, "torch")
    torch.manual_seed(0)
    model = wl.build_model(size).train()  # type: ignore[arg-type]
    batch = wl.make_batch(size, batch_size, torch.device("cpu"),  # type: ignore[arg-type]
                          torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), lr=wl.workload.learning_rate, momentum=0.9)
    bf16 = precision == "amp_bf16"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = wl.loss(model, batch)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(iterations):
        step()
    return batch_size * iterations / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp_bf16"])
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--framework", default="torch", choices=["torch", "jax"])
    args = ap.parse_args()
    bare_fn = bare_jax_loop if args.framework == "jax" else bare_loop
    pipelined: list[float] = []
    wl = get_workload(args.workload)
    batch = wl.default_batch_sizes[args.size][0]
    bare, ours, ours_mean = [], [], []
    for i in range(args.rounds):
        bare.append(bare_fn(args.workload, args.size, batch, args.precision,
                            args.iterations, warmup=10))
        if args.framework == "jax":
            pipelined.append(bare_jax_loop(args.workload, args.size, batch, args.precision,
                                           args.iterations, warmup=10, sync_each_step=False))
        r = accelbench.run(args.workload, size=args.size, precision=args.precision,
                           framework=args.framework, iterations=args.iterations, store=False,
                           energy=False)
        if r.status != "ok" or r.stats is None:
            raise SystemExit(f"accelbench run failed: {r.status} {r.error}")
        ours.append(r.stats.samples_per_s)
        ours_mean.append(batch / r.stats.mean_s)
        print(f"round {i + 1}: bare {bare[-1]:10.2f}/s   accelbench {ours[-1]:10.2f}/s "
              f"(at mean step time {ours_mean[-1]:10.2f}/s)   ratio {ours[-1] / bare[-1]:.3f}")
    ratio = statistics.median(ours) / statistics.median(bare)
    ratio_mean = statistics.median(ours_mean) / statistics.median(bare)
    print(f"{args.framework} {args.workload} {args.size} bs={batch} {args.precision}: "
          f"accelbench/bare throughput ratio {ratio:.3f} as reported (median step), "
          f"{ratio_mean:.3f} at the mean step time like the bare loop (target >= 0.98)")
    if pipelined:
        print(f"bare loop synchronised each step / pipelined (asynchronous dispatch): "
              f"{statistics.median(bare) / statistics.median(pipelined):.3f} (the cost of "
              "timing every iteration on its own, not of accelbench)")


if __name__ == "__main__":
    main()
