"""The order in which a torch ``DataLoader(dataset, batch_size=B, shuffle=True,
drop_last=True, generator=Generator().manual_seed(seed))`` visits a map-style dataset,
reproduced with numpy alone, so that another framework's loader (JAX's
:class:`~accelbench.data.loader.BatchLoader`, for ``accelbench train --framework jax``) reads
a seed's samples in the order torch's trainer reads them.

torch's CPU generator is the 32-bit Mersenne Twister (MT19937) seeded as numpy's legacy
``RandomState(seed)`` seeds it (``init_genrand``), so numpy's ``MT19937`` bit generator yields
the same 32-bit words. From that generator the ``DataLoader`` takes, in this order:

- a 64-bit base seed (two words) each time an iterator over it is made: every epoch with
  ``num_workers=0``, once with persistent workers (``num_workers > 0``);
- each epoch, the ``RandomSampler``'s ``randperm(n)``: a Fisher-Yates shuffle whose i-th
  swap partner is ``i + word % (n - i)`` (one word per swap, ``n - 1`` words; torch's rule
  for n below 2^32 / 20), batches of B cut from it, the last partial one dropped;
- then the sampler's second ``randperm(n)``, of which it keeps ``num_samples % n`` = 0
  indices: ``n - 1`` more words, spent only to be dropped.

``tests/test_totarget_order.py`` checks this against torch's ``DataLoader`` over several
epochs, with and without workers.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: torch's randperm takes one 32-bit word per swap below this many samples (above it, 64-bit
#: draws that are not reproduced here).
LIMIT = (2**32 - 1) // 20


def _randperm(words: np.random.MT19937, n: int) -> np.ndarray:
    out = np.arange(n)
    if n < 2:
        return out
    swaps = np.arange(n - 1) + words.random_raw(n - 1).astype(np.int64) % (n - np.arange(n - 1))
    for i, z in enumerate(swaps.tolist()):
        out[i], out[z] = out[z], out[i]
    return out


def torch_loader_order(n: int, batch: int, seed: int, *, workers: int = 0
                       ) -> Iterator[list[int]]:
    """The index batches, epoch after epoch, of torch's shuffled ``DataLoader`` over ``n``
    samples (``batch`` each, the last partial batch dropped, ``generator`` seeded by
    ``seed``, ``workers`` worker processes, persistent where there are any). ValueError for
    an ``n`` or seed this does not reproduce."""
    if not 0 < batch <= n < LIMIT:
        raise ValueError(f"torch's order of {n} samples in batches of {batch}: not "
                         f"reproduced (batches of 1..n samples, n below {LIMIT})")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed {seed}: torch's order is reproduced for 0 <= seed < 2^32")
    words = np.random.MT19937(0)
    words._legacy_seeding(seed)  # init_genrand(seed): torch's manual_seed
    first = True
    while True:
        if first or workers == 0:
            words.random_raw(2)  # the iterator's base seed
        first = False
        order = _randperm(words, n)
        for start in range(0, n - batch + 1, batch):
            yield [int(i) for i in order[start:start + batch]]
        words.random_raw(n - 1)  # the sampler's trailing randperm(n)[:0]
