"""The torch step's next-batch callable over a ``DataLoader``: each batch timed by the
:class:`~accelbench.data.stall.InputTimer` and moved to the step's device. ``--input-analysis``
(:mod:`accelbench.data.analysis`) stops its workers (:meth:`Feed.stop`, so that no worker
reads or maps the dataset's files while their pages are dropped or read in), and holds
one batch on the device for the synthetic pass (:attr:`Feed.fixed`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.data.skipping import DataError, SkippingSet, stop_reason

if TYPE_CHECKING:
    import torch

    from accelbench.data.stall import InputTimer


class Feed:
    """Batches of a ``DataLoader`` made by ``make_loader(epoch)``, forever (one epoch after
    another), on ``device``."""

    def __init__(self, make_loader: Callable[[int], Any], device: torch.device, pin: bool,
                 timer: InputTimer, files: Callable[[], list[Path]] | None,
                 skipping: SkippingSet | None = None) -> None:
        self.make_loader, self.device, self.pin, self.timer = make_loader, device, pin, timer
        self.skipping = skipping
        """The dataset's skipped files (:mod:`accelbench.data.skipping`), or None."""
        self._skip_bytes = 0
        if skipping is not None:
            timer.facts["skipped"] = skipping.skipped()
        self.files = files
        """The dataset's files (for the page cache), or None (a plugin's own dataset)."""
        self.fixed: tuple[torch.Tensor, ...] | None = None
        """A batch on the device every call returns instead (the synthetic pass), untimed."""
        self.last: tuple[torch.Tensor, ...] | None = None
        self._loader: Any = None
        self._batches: Iterator[Any] | None = None
        self._started = 0

    def __call__(self) -> tuple[torch.Tensor, ...]:
        if self.fixed is not None:
            return self.fixed
        self.last = self.timer.take(self._fetch)
        return self.last

    def _fetch(self) -> tuple[torch.Tensor, ...]:
        if self._batches is None:
            self._loader = self.make_loader(self._started)
            self._started += 1
            self._batches = self._forever(self._loader)
        try:
            batch = next(self._batches)
        except DataError:  # a worker's carries its traceback: the record gets one line
            if self.skipping is None:
                raise
            failed = self.skipping.skips.read()
            raise DataError(stop_reason(failed, len(self.skipping),
                                        self.skipping.limit)) from None
        if self.skipping is not None and self.skipping.skips.size() != self._skip_bytes:
            self._skip_bytes = self.skipping.skips.size()
            self.timer.facts["skipped"] = self.skipping.skipped()
        return tuple(t.to(self.device, non_blocking=self.pin) for t in batch)

    def _forever(self, loader: Any) -> Iterator[Any]:
        epoch = 0
        while True:
            set_epoch = getattr(getattr(loader, "sampler", None), "set_epoch", None)
            if callable(set_epoch):  # a sharded sampler: a new order each pass
                set_epoch(epoch)
            yield from loader
            epoch += 1

    def batches_per_epoch(self) -> int:
        """Batches of one pass over the dataset (the last partial batch dropped)."""
        return len(self.make_loader(0))

    def stop(self) -> None:
        """Shut the loader's workers down (the next call starts a new loader): nothing
        reads the dataset until then, and no worker keeps its files mapped."""
        if self._batches is not None:
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()
        it = getattr(self._loader, "_iterator", None)  # persistent workers live here
        shutdown = getattr(it, "_shutdown_workers", None)
        if callable(shutdown):
            shutdown()
        # a dataset read in this process (0 workers) may hold its files mapped
        release = getattr(getattr(self._loader, "dataset", None), "release", None)
        if callable(release):
            release()
        self._loader, self._batches = None, None
