"""Harness overhead: accelbench's reported throughput vs a bare, end-synchronised loop.

For every workload at the chosen size (tiny by default) and both frameworks, the same
model, batch, optimizer and precision are trained by a bare hand-written loop (N steps,
one wait for the device at the end: the fastest a training loop goes; in a fresh
process of its own, as accelbench's worker is) and by
``accelbench.run(..., iterations=N)`` (a fresh worker, as users run it). Rounds alternate
framework, workload and the two loops, so machine noise hits both alike. The ratio is
accelbench / bare, at the throughput accelbench reports (the median of its series) and at
its mean step time; the target is >= 0.98. N is sized from a first bare run so each
measurement lasts about ``--seconds``. The machine's load average and the other
processes' CPU use during accelbench's window (its noise record) are printed with it.

    python benchmarks/harness_overhead.py                      # both frameworks, all tiny
    python benchmarks/harness_overhead.py --framework jax --workload lstm --rounds 5
    python benchmarks/harness_overhead.py --framework jax --loop-only   # see loop_only

``--loop-only`` (JAX) compares the timing rules alone on one compiled step, in one process,
in at least 15 short rounds (``--seconds``, 0.25 s by default here) whose order rotates:
a wait after every step (accelbench before issue 25), accelbench's measurement loop
(:func:`accelbench.execution.measure.measure` with the step's own timer: blocks of k
queued while a thread of its own stamps each block's end, the loop never waiting for the
device unless it runs a second ahead; all its blocks' time), the same loop with blocks
that wait for all their steps on the loop (the rule before), blocks of k whose ends a bare
thread waits for with no bookkeeping at all (what a timer off the dispatching thread
costs at least), blocks whose ends the loop itself polls (``is_ready()`` after each step,
no thread, no wait), one wait at the end of the same n steps (bare), and bare again (the
control: the noise floor of a paired ratio, and any bias of the order). Each round gives
paired ratios bare / rule; the median of those, its quartiles (the spread a busy machine
leaves) and each rule's fastest round over bare's fastest are printed with the load, and
the host's own time to queue the n steps as a share of bare's (near 1: the step is
host-bound, the device waits on the dispatch whatever the rule).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import accelbench
from accelbench.workloads import get_implementation, get_workload
from accelbench.workloads.registry import list_workloads


def bare_jax(workload: str, size: str, batch_size: int, iterations: int, warmup: int) -> float:
    """A plain jitted JAX/optax loop (the workload's optimizer, true fp32 matmuls, buffers
    donated like accelbench's step), synchronised once at the end; returns samples/s."""
    import jax
    import optax
    from flax import nnx

    from accelbench.backends.jax.backend import make_optimizer
    from accelbench.backends.jax.hostinit import host_init

    impl = get_implementation(workload, "jax")
    with host_init():  # the same parameters as accelbench's build, built as fast
        model = impl.build_model(size, nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = impl.make_batch(size, batch_size, jax.random.key(0))
    tx = make_optimizer(impl.workload)
    opt_state = tx.init(params)

    def loss_fn(p, r, b):  # type: ignore[no-untyped-def]
        m = nnx.merge(graphdef, p, r, copy=True)
        loss = impl.loss(m, b)
        return loss, nnx.state(m, nnx.Not(nnx.Param))

    def step(p, r, o, b):  # type: ignore[no-untyped-def]
        (loss, new_r), g = jax.value_and_grad(loss_fn, has_aux=True)(p, r, b)
        updates, o = tx.update(g, o, p)
        return optax.apply_updates(p, updates), new_r, o, loss

    jitted = jax.jit(step, donate_argnums=(0, 1, 2))
    with jax.default_matmul_precision("float32"):
        for _ in range(warmup):
            params, rest, opt_state, loss = jitted(params, rest, opt_state, batch)
        jax.block_until_ready(loss)
        t0 = time.perf_counter()
        for _ in range(iterations):
            params, rest, opt_state, loss = jitted(params, rest, opt_state, batch)
        jax.block_until_ready(loss)
    return batch_size * iterations / (time.perf_counter() - t0)


def bare_torch(workload: str, size: str, batch_size: int, iterations: int, warmup: int
               ) -> float:
    """A plain PyTorch loop on the CPU (the workload's optimizer); returns samples/s."""
    import torch

    from accelbench.backends.torch.step import make_optimizer

    impl = get_implementation(workload, "torch")
    torch.manual_seed(0)
    model = impl.build_model(size).train()  # type: ignore[attr-defined]
    batch = impl.make_batch(size, batch_size, torch.device("cpu"),  # type: ignore[call-arg]
                            torch.Generator().manual_seed(0))
    wl = impl.workload
    opt = make_optimizer(wl.optimizer, list(model.parameters()), lr=wl.learning_rate,
                         weight_decay=wl.weight_decay, fused=False)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = impl.loss(model, batch)  # type: ignore[arg-type]
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(iterations):
        step()
    return batch_size * iterations / (time.perf_counter() - t0)


BARE = {"torch": bare_torch, "jax": bare_jax}


def loop_only(workload: str, size: str, rounds: int, seconds: float = 0.25  # noqa: C901, PLR0915
              ) -> dict[str, Any]:
    """The timing rules on one :class:`JaxTrainStep`, alternated in short rounds.

    Each round runs, back to back and in a rotating order, the same ``n`` steps (about
    ``seconds``) seven ways: a wait after every step, accelbench's measurement loop
    (:func:`accelbench.execution.measure.measure` with the step's own timer, all its
    blocks' time), the same loop with blocks that wait for all their steps on the loop,
    blocks waited for by a bare thread, blocks polled on the loop, and one wait at the end
    (bare), twice (the second a control). A round gives
    paired ratios (bare / rule), so a neighbour's burst hits one round, not one rule.
    Returned: k, n, the median paired ratio of each rule with its quartiles, and each
    rule's fastest round over bare's fastest (the least-disturbed figure)."""
    from accelbench.backends import get_backend
    from accelbench.backends.blocks import HostBlocks, block_timer_of
    from accelbench.execution.measure import Loop, block_size, measure, run_ahead, warm_up
    from accelbench.spec import MeasurementPolicy, RunSpec

    batch = get_workload(workload).default_batch_sizes[size][0]
    spec = RunSpec(workload=workload, size=size, batch_size=batch, framework="jax")
    step = get_backend("jax").build_step(spec, get_implementation(workload, "jax"))
    warm = warm_up(step.step, step.synchronize, MeasurementPolicy())
    k = block_size(warm, MeasurementPolicy())
    per_step_s = float(statistics.median(warm[-3:]))
    n = max(10 * k, math.ceil(seconds / per_step_s / k) * k)

    def wait_each() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            step.step()
            step.synchronize()
        return time.perf_counter() - t0

    ahead = run_ahead(warm, k, MeasurementPolicy())

    def ours(timer: Any = None) -> float:
        got = measure(Loop(step.step, step.synchronize, MeasurementPolicy(iterations=n), batch,
                           blocks=timer or block_timer_of(step)), k=k, ahead=ahead)
        return sum(t * s for t, s in zip(got.times_s, got.block_steps, strict=True))

    def idle_blocks() -> float:
        return ours(HostBlocks(step.step, step.synchronize))

    def bare() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            step.step()
        step.synchronize()
        return time.perf_counter() - t0

    def off_thread() -> float:  # k-step blocks stamped by a thread of their own
        import queue
        import threading

        losses: queue.SimpleQueue[Any] = queue.SimpleQueue()

        def stamp() -> None:  # what a timer could do: wait for each block off the loop
            while (loss := losses.get()) is not None:
                loss.block_until_ready()

        waiter = threading.Thread(target=stamp)
        waiter.start()
        t0 = time.perf_counter()
        for i in range(n):
            step.step()
            if (i + 1) % k == 0:
                losses.put(step.last_loss)
        step.synchronize()
        losses.put(None)
        waiter.join()
        return time.perf_counter() - t0

    def poll() -> float:  # block ends seen by polling is_ready() on the loop, no waits
        t0 = time.perf_counter()
        marks: list[Any] = []
        for i in range(n):
            step.step()
            if marks and marks[0].is_ready():
                marks.pop(0)
            if (i + 1) % k == 0:
                marks.append(step.last_loss)
        step.synchronize()
        return time.perf_counter() - t0

    def dispatch() -> float:  # the host's time to queue the n steps (waited for untimed)
        t0 = time.perf_counter()
        for _ in range(n):
            step.step()
        took = time.perf_counter() - t0
        step.synchronize()
        return took

    rules = {"wait_each": wait_each, "blocks": ours, "idle_blocks": idle_blocks,
             "off_thread": off_thread, "bare": bare, "dispatch": dispatch, "poll": poll,
             "bare_again": bare}
    times: dict[str, list[float]] = {r: [] for r in rules}
    names = list(rules)
    for i in range(rounds):
        j = i % len(names)
        for name in names[j:] + names[:j]:  # rotate the order
            times[name].append(rules[name]())
    out: dict[str, Any] = {"k": k, "n": n, "step_ms": per_step_s * 1e3}
    out["dispatch_share"] = statistics.median(
        d / b for d, b in zip(times["dispatch"], times["bare"], strict=True))
    for name in ("wait_each", "blocks", "idle_blocks", "off_thread", "poll", "bare_again"):
        paired = sorted(b / t for b, t in zip(times["bare"], times[name], strict=True))
        q = statistics.quantiles(paired, n=4)
        out[name] = (statistics.median(paired), q[0], q[2], min(times["bare"]) /
                     min(times[name]))
    return out


def bare_rate(fw: str, workload: str, size: str, batch: int, n: int, warmup: int) -> float:
    """:data:`BARE`'s loop in a fresh process (one framework imported, like a worker)."""
    out = subprocess.run(
        [sys.executable, __file__, "--bare", fw, workload, size, str(batch), str(n),
         str(warmup)], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def _other_cores(r: Any) -> float | None:
    judged = (r.noise.get("host") or {}).get("judged")
    window = (r.noise.get("host") or {}).get(judged) if judged else None
    return float(window["other_cores"]) if window and "other_cores" in window else None


def main() -> None:  # noqa: PLR0915
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", nargs="+", default=["torch", "jax"],
                    choices=["torch", "jax"])
    ap.add_argument("--workload", nargs="+", default=None,
                    help="default: every workload with both implementations")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=None,
                    help="about how long each measurement lasts (sets N; default 1, "
                         "--loop-only 0.25)")
    ap.add_argument("--bare", nargs=6, metavar=("FW", "WORKLOAD", "SIZE", "BATCH", "N", "WARMUP"),
                    help=argparse.SUPPRESS)  # one bare loop, in its own process
    ap.add_argument("--loop-only", action="store_true",
                    help="JAX: the timing rules alone, in one process (see above)")
    args = ap.parse_args()
    if args.loop_only:
        args.seconds = args.seconds or 0.25
        rounds = max(args.rounds, 15)
        print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} "
              f"CPUs; {rounds} rounds of about {args.seconds:g} s a rule, paired ratios "
              "bare / rule: median [quartiles], and fastest/fastest", flush=True)
        for w in args.workload or [w.name for w in list_workloads()]:
            load0 = os.getloadavg()[0]
            r = loop_only(w, args.size, rounds, args.seconds)
            line = "  ".join(
                f"{label} {r[key][0]:.3f} [{r[key][1]:.3f}-{r[key][2]:.3f}] min {r[key][3]:.3f}"
                for key, label in (("wait_each", "wait every step"),
                                   ("idle_blocks", "blocks waiting for all"),
                                   ("blocks", "accelbench blocks"),
                                   ("off_thread", "bare waiter thread"),
                                   ("poll", "polled on the loop"),
                                   ("bare_again", "bare again (control)")))
            flag = "" if r["blocks"][0] >= 0.98 else "  < 0.98"
            print(f"jax {w:12s} k={r['k']:3d} n={r['n']:4d} step {r['step_ms']:6.2f} ms  "
                  f"{line}  host dispatch {r['dispatch_share']:.2f} of bare  load "
                  f"{load0:.2f}-{os.getloadavg()[0]:.2f}{flag}", flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
        return
    if args.bare:
        fw, w, size, batch, n, warm = args.bare
        print(BARE[fw](w, size, int(batch), int(n), int(warm)))
        return
    args.seconds = args.seconds or 1.0
    names = args.workload or [w.name for w in list_workloads()]
    cases = [(fw, w) for w in names for fw in args.framework]
    n_steps: dict[tuple[str, str], int] = {}
    bare: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    ours: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    ours_mean: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    others: list[float] = []
    blocks: dict[tuple[str, str], int] = {}
    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs",
          flush=True)
    for rnd in range(args.rounds):
        for fw, w in cases:
            batch = get_workload(w).default_batch_sizes[args.size][0]
            if (fw, w) not in n_steps:  # size N from a short bare run
                rate = bare_rate(fw, w, args.size, batch, 20, warmup=5)
                n_steps[fw, w] = int(min(5000, max(300, args.seconds * rate / batch)))
            n = n_steps[fw, w]
            bare[fw, w].append(bare_rate(fw, w, args.size, batch, n, warmup=10))
            r = accelbench.run(w, size=args.size, framework=fw, iterations=n, store=False,
                               energy=False)
            if r.status != "ok" or r.stats is None:
                raise SystemExit(f"accelbench run {fw} {w} failed: {r.status} {r.error}")
            ours[fw, w].append(r.stats.samples_per_s)
            ours_mean[fw, w].append(batch / r.stats.mean_s)
            blocks[fw, w] = r.stats.steps_per_block
            oc = _other_cores(r)
            if oc is not None:
                others.append(oc)
            print(f"round {rnd + 1} {fw:5s} {w:12s} N={n:5d} k={r.stats.steps_per_block:4d} "
                  f"bare {bare[fw, w][-1]:10.1f}/s  accelbench {ours[fw, w][-1]:10.1f}/s  "
                  f"ratio {ours[fw, w][-1] / bare[fw, w][-1]:.3f}  other cores "
                  f"{'-' if oc is None else f'{oc:.2f}'}", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}; other processes' CPU cores "
          f"during accelbench's windows: median "
          f"{statistics.median(others) if others else float('nan'):.2f}, max "
          f"{max(others, default=float('nan')):.2f}")
    print(f"{'framework':9s} {'workload':12s} {'N':>5s} {'k':>4s} {'ratio':>6s} "
          f"{'at mean':>7s} {'min':>6s} {'max':>6s}  (accelbench / bare end-synchronised, "
          f"medians of {args.rounds} rounds; target >= 0.98)")
    for fw, w in cases:
        b = statistics.median(bare[fw, w])
        per_round = [o / bb for o, bb in zip(ours[fw, w], bare[fw, w], strict=True)]
        flag = "" if statistics.median(ours[fw, w]) / b >= 0.98 else "  < 0.98"
        print(f"{fw:9s} {w:12s} {n_steps[fw, w]:5d} {blocks[fw, w]:4d} "
              f"{statistics.median(ours[fw, w]) / b:6.3f} "
              f"{statistics.median(ours_mean[fw, w]) / b:7.3f} {min(per_round):6.3f} "
              f"{max(per_round):6.3f}{flag}")


if __name__ == "__main__":
    main()
