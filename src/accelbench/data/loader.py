"""A small batch loader of numpy arrays: what JAX's input pipeline uses where torch uses its
``DataLoader`` (same meaning of ``--loader-workers``: 0 prepares each batch in the step's
own process when the step asks; N > 0 starts N worker processes that prepare batches
ahead, ``prefetch`` each, while the step computes).

Framework-neutral (numpy only): the workers are spawned, not forked (a process running
XLA's threads must not fork), and import nothing but this module and the dataset's. Each
epoch visits the samples in a new random order (a generator seeded by ``seed``) and drops
the last partial batch, as the torch pipeline's ``DataLoader(shuffle=True,
drop_last=True)``; batches come back in order. Each worker seeds its own
:class:`random.Random` (and Python's and numpy's global generators, for a plugin's dataset)
from ``seed`` and its number.
"""

from __future__ import annotations

import queue
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

#: Seconds between checks that the workers are alive while waiting for a batch.
POLL_S = 2.0


def sample_of(dataset: Any, index: int, rng: random.Random) -> Any:
    """Sample ``index``: ``dataset.sample(index, rng)`` for accelbench's datasets
    (:mod:`accelbench.data.transforms`), else ``dataset[index]`` (a plugin's map-style
    dataset, whose draws come from the global generators the worker seeded)."""
    sample = getattr(dataset, "sample", None)
    return sample(index, rng) if callable(sample) else dataset[index]


def collate(samples: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Samples (tuples of arrays or numbers) stacked field by field into a batch."""
    return tuple(np.stack([np.asarray(s[k]) for s in samples])
                 for k in range(len(samples[0])))


def _seed_globals(seed: int) -> random.Random:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    return random.Random(seed)


def _work(dataset: Any, tasks: Any, results: Any, seed: int) -> None:
    """A worker process: prepare the batches named on ``tasks`` until told to stop."""
    rng = _seed_globals(seed)
    while True:
        job = tasks.get()
        if job is None:
            return
        number, indices = job
        try:
            batch = collate([sample_of(dataset, i, rng) for i in indices])
        except Exception as exc:  # noqa: BLE001 - said in the step's process, one line
            results.put((number, None, f"{type(exc).__name__}: {exc}"))
            continue
        results.put((number, batch, None))


class BatchLoader:
    """Batches of ``batch`` samples of ``dataset`` forever, reshuffled each epoch.

    Args:
        dataset: ``__len__`` and ``sample(index, rng)`` (or ``__getitem__``).
        batch: Samples per batch (at most ``len(dataset)``; ValueError otherwise).
        workers: Worker processes (0: each batch made in this process on demand).
        prefetch: Batches each worker prepares ahead.
        seed: The shuffle's and the workers' seed.
        order: The batches' indices, epoch after epoch, instead of the loader's own shuffle
            (e.g. :func:`accelbench.data.shuffle.torch_loader_order`: torch's order).
    """

    def __init__(self, dataset: Any, batch: int, workers: int, prefetch: int, seed: int,
                 order: Iterator[list[int]] | None = None) -> None:
        if not 0 < batch <= len(dataset):
            raise ValueError(f"a batch of {batch} from {len(dataset)} samples")
        self.dataset, self.batch, self.workers = dataset, batch, workers
        self._order = (self._indices(np.random.default_rng(seed)) if order is None
                       else order)
        self._rng = random.Random(seed)
        self._procs: list[Any] = []
        self._sent = self._next = 0
        self._ready: dict[int, tuple[np.ndarray, ...]] = {}
        if workers > 0:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")
            self._tasks, self._results = ctx.Queue(), ctx.Queue()
            for w in range(workers):
                proc = ctx.Process(target=_work, name=f"accelbench-loader-{w}", daemon=True,
                                   args=(dataset, self._tasks, self._results, seed + 1 + w))
                proc.start()
                self._procs.append(proc)
            for _ in range(workers * prefetch):
                self._send()

    def _indices(self, gen: np.random.Generator) -> Iterator[list[int]]:
        n = len(self.dataset)
        while True:
            order = gen.permutation(n)
            for start in range(0, n - self.batch + 1, self.batch):
                yield [int(i) for i in order[start:start + self.batch]]

    def _send(self) -> None:
        self._tasks.put((self._sent, next(self._order)))
        self._sent += 1

    def __iter__(self) -> BatchLoader:
        return self

    def __next__(self) -> tuple[np.ndarray, ...]:
        if not self._procs:
            return collate([sample_of(self.dataset, i, self._rng) for i in next(self._order)])
        while self._next not in self._ready:
            try:
                number, batch, error = self._results.get(timeout=POLL_S)
            except queue.Empty:
                dead = [p for p in self._procs if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"loader worker {dead[0].name} exited (code "
                                       f"{dead[0].exitcode})") from None
                continue
            if error is not None:
                raise RuntimeError(f"loader worker: {error}")
            self._ready[number] = batch
        out = self._ready.pop(self._next)
        self._next += 1
        self._send()
        return out

    def close(self) -> None:
        """Stop the workers (also done at exit: they are daemons)."""
        for _ in self._procs:
            self._tasks.put(None)
        for proc in self._procs:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.terminate()
        self._procs = []
