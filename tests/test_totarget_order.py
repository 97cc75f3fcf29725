"""The JAX to-target trainer reads a seed's training samples in the torch trainer's order:
:func:`accelbench.data.shuffle.torch_loader_order` against torch's own shuffled
``DataLoader`` (the trainer's settings: ``shuffle=True``, ``drop_last=True``, a generator
seeded by the seed), over several epochs, without workers and with a persistent worker, and
the loader that uses it. No training: index lists only."""

from __future__ import annotations

import itertools

import pytest

from accelbench.data.loader import BatchLoader
from accelbench.data.shuffle import torch_loader_order

torch = pytest.importorskip("torch")


def _torch_batches(n: int, batch: int, seed: int, workers: int, epochs: int
                   ) -> list[list[int]]:
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(n)), batch_size=batch, shuffle=True, drop_last=True,
                        num_workers=workers, persistent_workers=workers > 0,
                        generator=torch.Generator().manual_seed(seed))
    return [[int(i) for i in b] for _ in range(epochs) for b in loader]


@pytest.mark.parametrize(("n", "batch", "seed", "workers"),
                         [(100, 8, 0, 0), (37, 5, 1003, 0), (64, 32, 7, 0), (50, 7, 2, 1)])
def test_the_order_is_torchs_dataloader_over_epochs(n: int, batch: int, seed: int,
                                                     workers: int) -> None:
    want = _torch_batches(n, batch, seed, workers, epochs=3)
    got = list(itertools.islice(torch_loader_order(n, batch, seed, workers=workers),
                                len(want)))
    assert got == want
    # the epochs differ (a reshuffle each epoch), and a partial batch is never made
    per_epoch = n // batch
    assert got[:per_epoch] != got[per_epoch:2 * per_epoch]
    assert {len(b) for b in got} == {batch}


def test_another_seed_is_another_order_and_out_of_range_is_refused() -> None:
    assert next(torch_loader_order(100, 8, 0)) != next(torch_loader_order(100, 8, 1))
    for args in ((10, 11, 0), (10, 0, 0), (10, 2, -1), (10, 2, 2**32)):
        with pytest.raises(ValueError):
            next(torch_loader_order(*args))


def test_the_batch_loader_reads_in_the_order_it_is_given() -> None:
    """BatchLoader with ``order`` (what the JAX trainer passes) yields the samples of those
    indices; without it, its own shuffle (unchanged)."""

    class Samples:
        def __len__(self) -> int:
            return 40

        def sample(self, index: int, rng: object) -> tuple[int]:
            return (index,)

    loader = BatchLoader(Samples(), 4, 0, 2, 5, order=torch_loader_order(40, 4, 5))
    got = [next(loader)[0].tolist() for _ in range(20)]
    assert got == _torch_batches(40, 4, 5, 0, epochs=2)
    own = BatchLoader(Samples(), 4, 0, 2, 5)
    assert [next(own)[0].tolist() for _ in range(20)] != got
