"""``--input-analysis``: DS-Analyzer's split of a data stall (Mohan et al., "Analyzing and
Mitigating Data Stalls in DNN Training", VLDB 2021), measured on the case itself.

After the measured window the case runs three more passes of the same step:

- **synthetic**: one batch held on the device, no loader: the rate the step can ingest;
- **cached**: the dataset read into the page cache first (every file read once), so the
  loader only decodes and augments: the gap to synthetic is the *prep stall*,
  ``1 - rate_cached / rate_synthetic``;
- **cold**: the dataset's pages dropped first (``posix_fadvise(POSIX_FADV_DONTNEED)``,
  :mod:`accelbench.data.pagecache`), so the loader also reads the storage: the gap to
  cached is the *fetch stall*, ``1 - rate_cold / rate_cached``.

Each pass is run as three blocks, in rounds of alternating order, so that a machine growing
busier or quieter slows every pass alike. The loader's workers are stopped before the
page cache is dropped or read in, so that none holds a batch prepared before; each block
starts a fresh loader and takes one untimed batch (the pipeline filling) before its timed
steps. The cold pass stays inside one epoch (each
sample read once, so every read is cold), and ``mincore(2)`` counts the dataset's
resident pages as each pass begins: a pass whose page cache is not as asked (pages that
would not drop, a dataset larger than the page cache) is ``unavailable`` with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from accelbench.data import pagecache
from accelbench.input_stats import InputStats

#: The cold pass needs at most this share of the dataset's pages resident when it starts.
COLD_MAX_RESIDENT = 0.05
#: The cached pass needs at least this share resident when it starts.
CACHED_MIN_RESIDENT = 0.95
#: Timed steps per pass: the measured window's, at least MIN_STEPS and at most MAX_STEPS
#: (more where the energy meters need a longer window).
MIN_STEPS = 3
MAX_STEPS = 50
#: Blocks each pass is split into, run in rounds of alternating order.
ROUNDS = 3

METHOD = ("after the measured window, the same step three ways: one batch held on the "
          "device (synthetic), a fresh loader over the dataset read into the page cache "
          "(cached), and over the dataset dropped from it with posix_fadvise DONTNEED "
          "(cold, one epoch at most a block); each pass in 3 blocks, run in rounds of "
          "alternating order, each block timed after one untimed batch. "
          "prep stall = 1 - cached/synthetic, fetch stall = 1 - cold/cached (DS-Analyzer)")


class _Step(Protocol):
    def step(self) -> None: ...

    def synchronize(self) -> None: ...


class _Feed(Protocol):
    fixed: Any
    last: Any
    files: Callable[[], list[Any]] | None

    def stop(self) -> None: ...

    def batches_per_epoch(self) -> int: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Pass:
    """One pass: its timed steps, their seconds and rate, and the share of the dataset's
    pages in the page cache as it began; ``note`` says why a pass is unavailable."""

    steps: int = 0
    seconds: float | None = None
    samples_per_s: float | None = None
    resident_share: float | None = None
    note: str = ""
    block_samples_per_s: tuple[float, ...] = ()
    """Each block's own rate, in the order run: their spread is the pass's noise."""

    @property
    def available(self) -> bool:
        return self.samples_per_s is not None

    @property
    def spread(self) -> float | None:
        """(fastest - slowest block) / the pass's rate, or None from fewer than 2 blocks."""
        rates = self.block_samples_per_s
        if len(rates) < 2 or not self.samples_per_s:
            return None
        return (max(rates) - min(rates)) / self.samples_per_s


@dataclass(frozen=True, kw_only=True, slots=True)
class InputAnalysis:
    """The record's ``input["analysis"]``."""

    synthetic: Pass
    cached: Pass
    cold: Pass
    prep_stall: float | None = None
    """``1 - cached / synthetic`` (None: a pass unavailable)."""
    fetch_stall: float | None = None
    """``1 - cold / cached`` (None: a pass unavailable)."""
    method: str = METHOD
    energy_readings: dict[str, Any] = field(default_factory=dict, compare=False)
    """Not stored here: the first round's synthetic and cached blocks' energy readings,
    for :mod:`accelbench.data.energy`."""
    energy_blocks: dict[str, Any] = field(default_factory=dict, compare=False)
    """Not stored here: those blocks' steps and seconds (the energy figure's details)."""

    def to_dict(self) -> dict[str, Any]:
        def one(p: Pass) -> dict[str, Any]:
            out = dataclasses.asdict(p)
            out["block_samples_per_s"] = list(p.block_samples_per_s)
            return out

        return {"synthetic": one(self.synthetic), "cached": one(self.cached),
                "cold": one(self.cold),
                "prep_stall": self.prep_stall, "fetch_stall": self.fetch_stall,
                "method": self.method}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputAnalysis:
        names = {f.name for f in dataclasses.fields(Pass)}

        def one(key: str) -> Pass:
            raw = dict(data.get(key) or {})
            raw["block_samples_per_s"] = tuple(raw.get("block_samples_per_s") or ())
            return Pass(**{k: v for k, v in raw.items() if k in names})

        return cls(synthetic=one("synthetic"), cached=one("cached"), cold=one("cold"),
                   prep_stall=data.get("prep_stall"), fetch_stall=data.get("fetch_stall"),
                   method=data.get("method", METHOD))


def stall(slow: Pass, fast: Pass) -> float | None:
    """``1 - slow / fast``: the share of the faster pass's rate the slower one loses."""
    if slow.samples_per_s is None or not fast.samples_per_s:
        return None
    return 1.0 - slow.samples_per_s / fast.samples_per_s


class Meter(Protocol):
    """What a pass needs of a meter session: start, and stop with the samples done."""

    def start(self) -> None: ...

    def stop(self, samples: int) -> tuple[tuple[Any, ...], dict[str, Any]]: ...


def _timed(step: _Step, steps: int, samples_per_step: int, meter: Meter | None = None,
           enough: Callable[[int, float], bool] | None = None
           ) -> tuple[int, float, tuple[Any, ...]]:
    """One untimed step, then ``steps`` timed (more until ``enough(n, seconds)``): the
    steps, their seconds, and the meter's readings over them."""
    step.step()
    step.synchronize()
    if meter is not None:
        meter.start()
    t0 = time.perf_counter()
    n = 0
    while n < steps or (enough is not None and not enough(n, time.perf_counter() - t0)):
        step.step()
        n += 1
        if enough is not None:
            step.synchronize()
    step.synchronize()
    seconds = time.perf_counter() - t0
    readings: tuple[Any, ...] = ()
    if meter is not None:
        readings, _timeline = meter.stop(samples=samples_per_step * n)
    return n, seconds, readings


def _pass(n: int, seconds: float, samples_per_step: int, share: float | None) -> Pass:
    return Pass(steps=n, seconds=seconds, resident_share=share,
                samples_per_s=n * samples_per_step / seconds if seconds > 0 else None)


class _Rounds:
    """The passes' blocks as they are run: steps and seconds per pass, the page cache's
    share as each block began, and why a pass is unavailable."""

    def __init__(self) -> None:
        self.blocks: dict[str, list[tuple[int, float]]] = {k: [] for k in PASSES}
        self.shares: dict[str, list[float]] = {k: [] for k in PASSES}
        self.why: dict[str, str] = {}

    def result(self, name: str, samples_per_step: int, note: str = "") -> Pass:
        if name in self.why:
            shares = self.shares[name]
            return Pass(resident_share=shares[-1] if shares else None, note=self.why[name])
        n = sum(b[0] for b in self.blocks[name])
        secs = sum(b[1] for b in self.blocks[name])
        shares = self.shares[name]
        # the worst block's evidence: the fullest cold start, the emptiest cached one
        share = (max(shares) if name == "cold" else min(shares)) if shares else None
        rates = tuple(k * samples_per_step / t for k, t in self.blocks[name] if t > 0)
        return dataclasses.replace(_pass(n, secs, samples_per_step, share), note=note,
                                   block_samples_per_s=rates)


PASSES = ("synthetic", "cached", "cold")


def _synthetic(step: _Step, feed: _Feed, steps: int, samples_per_step: int, runs: _Rounds,
               meter: Meter | None, enough: Callable[[int, float], bool] | None
               ) -> tuple[Any, ...]:
    """A synthetic block: the last batch the loader gave, held on the device."""
    feed.stop()
    feed.fixed = feed.last
    try:
        n, secs, got = _timed(step, steps, samples_per_step, meter, enough)
    finally:
        feed.fixed = None
    runs.blocks["synthetic"].append((n, secs))
    return got


def _prepare(name: str, feed: _Feed, files: list[Any], runs: _Rounds) -> bool:
    """The page cache made ready for a cached (every file read) or cold (every file
    dropped) block, with no loader worker running; False (the reason in ``runs.why``)
    where it is not as the block needs."""
    feed.stop()  # no worker reads or maps a file while the page cache changes
    if name == "cached":
        pagecache.warm(files)
    elif (why := pagecache.drop(files)) is not None:
        runs.why[name] = f"unavailable: the page cache could not be dropped ({why})"
        return False
    share = pagecache.resident_share(files)
    if isinstance(share, str):
        runs.why[name] = f"unavailable: the page cache cannot be read ({share})"
        return False
    runs.shares[name].append(share)
    if name == "cached" and share < CACHED_MIN_RESIDENT:
        runs.why[name] = (
            f"unavailable: after reading every file once only {share:.0%} of the dataset's "
            "pages stayed in the page cache (a dataset larger than the free memory?)")
        return False
    if name == "cold" and share > COLD_MAX_RESIDENT:
        runs.why[name] = (
            f"unavailable: {share:.0%} of the dataset's pages stayed in the page cache "
            "after posix_fadvise DONTNEED (a file system that keeps files in memory, such "
            "as tmpfs, or pages another process maps)")
        return False
    return True


def analyse(step: _Step, feed: _Feed, samples_per_step: int, steps: int,
            meter: Meter | None = None, enough: Callable[[int, float], bool] | None = None
            ) -> InputAnalysis:
    """The three passes of ``step`` fed by ``feed`` (see the module), each split into
    :data:`ROUNDS` blocks run in rounds whose order alternates (synthetic, cached, cold;
    then cold, cached, synthetic; ...), so that a machine growing busier or quieter
    slows every pass alike; a pass's rate is its blocks' samples over their seconds.

    ``steps``: timed steps per pass (within :data:`MIN_STEPS`-:data:`MAX_STEPS`; a cold
    block at most one epoch less the untimed batch). ``meter``/``enough``: the first
    round's synthetic and cached blocks are metered (their readings in
    :attr:`InputAnalysis.energy_readings`), the synthetic one until ``enough(steps,
    seconds)`` (an energy window's minimum) and the cached one as many steps, so both
    cover the same samples.
    """
    steps = max(min(steps, MAX_STEPS), MIN_STEPS)
    per_round = math.ceil(steps / ROUNDS)
    files = feed.files() if feed.files is not None else None
    runs = _Rounds()
    if files is None:
        why = "unavailable: a plugin's own dataset has no files to read into or drop from " \
              "the page cache"
        runs.why.update(cached=why, cold=why)
    epoch = feed.batches_per_epoch()
    if epoch < 2:
        runs.why.setdefault("cold", f"unavailable: the dataset holds {epoch} batch(es), "
                            "none left to time cold after the pipeline's first (a larger "
                            "dataset, or a smaller batch)")
    cold_steps = min(per_round, epoch - 1)
    readings: dict[str, Any] = {}
    for r in range(ROUNDS):
        order = PASSES if r % 2 == 0 else PASSES[::-1]
        for name in order:
            metered = meter if r == 0 and name != "cold" else None
            if name == "synthetic":
                got = _synthetic(step, feed, per_round, samples_per_step, runs, metered,
                                 enough if metered is not None else None)
                if metered is not None:
                    readings["synthetic"] = got
                continue
            if files is None:  # a plugin's dataset: only the energy's real-data block runs
                if metered is not None:
                    same = runs.blocks["synthetic"][0][0]
                    readings["cached"] = _timed(step, same, samples_per_step, metered)[2]
                    feed.stop()
                continue
            if name in runs.why or not _prepare(name, feed, files, runs):
                continue
            todo = cold_steps if name == "cold" else (
                runs.blocks["synthetic"][0][0] if metered is not None else per_round)
            n, secs, got = _timed(step, todo, samples_per_step, metered)
            runs.blocks[name].append((n, secs))
            if metered is not None:
                readings["cached"] = got
    feed.stop()
    synthetic = runs.result("synthetic", samples_per_step)
    cached = runs.result("cached", samples_per_step)
    cold = runs.result("cold", samples_per_step, note=(
        f"{cold_steps} timed steps a round: the dataset holds one epoch of {epoch} batches"
        if cold_steps < per_round else ""))
    return InputAnalysis(synthetic=synthetic, cached=cached, cold=cold,
                         prep_stall=stall(cached, synthetic), fetch_stall=stall(cold, cached),
                         energy_readings=readings,
                         energy_blocks={k: {"steps": runs.blocks[k][0][0],
                                            "seconds": runs.blocks[k][0][1]}
                                        for k in ("synthetic", "cached")
                                        if meter is not None and runs.blocks[k]})


def within_noise(stall_value: float, *passes: Pass) -> bool:
    """Whether a stall is smaller than the larger spread of its two passes' blocks (the
    difference could be the machine's noise)."""
    spreads = [p.spread for p in passes if p.spread is not None]
    return bool(spreads) and abs(stall_value) < max(spreads)


def analysis_line(record: dict[str, Any] | None) -> str | None:
    """``synthetic 812 samples/s, cached 640 (prep stall 21.2%), cold 590 (fetch stall
    7.8%)``: ``run``'s summary line, or None without an analysis."""
    raw = (record or {}).get("analysis")
    if not isinstance(raw, dict):
        return None
    a = InputAnalysis.from_dict(raw)

    def rate(p: Pass) -> str:
        return f"{p.samples_per_s:,.4g}" if p.samples_per_s is not None else "unavailable"

    def share(x: float | None, *passes: Pass) -> str:
        if x is None:
            return "unavailable"
        noise = within_noise(x, *passes)
        return f"{100 * x:.1f}%" + (", within the blocks' noise" if noise else "")

    parts = [f"synthetic {rate(a.synthetic)} samples/s",
             f"cached {rate(a.cached)} (prep stall {share(a.prep_stall, a.synthetic, a.cached)})",
             f"cold {rate(a.cold)} (fetch stall {share(a.fetch_stall, a.cached, a.cold)})"]
    why = next((p.note for p in (a.cached, a.cold) if p.note.startswith("unavailable")), "")
    return ", ".join(parts) + (f"; {why}" if why else "")


def analyse_case(step: Any, input_record: InputStats, samples_per_step: int, steps: int,
                 energy: Sequence[Any], device: str, meter: Meter | None = None,
                 enough: Callable[[int, float], bool] | None = None) -> InputStats:
    """The record's ``input`` with ``analysis`` and ``energy`` added: the passes of
    :func:`analyse` over the step's feed (the torch step's batch callable), and the
    energy figures of :mod:`accelbench.data.energy` (``energy``: the window's readings)."""
    from accelbench.data.energy import input_energy

    feed: Any = getattr(step, "_next_batch", None)  # the torch step's Feed (torch/feed.py)
    if not all(hasattr(feed, a) for a in ("stop", "fixed", "last", "files")):
        why = "unavailable: this framework's step has no feed the analysis can drive"
        none = Pass(note=why)
        analysis = InputAnalysis(synthetic=none, cached=none, cold=none)
    else:
        analysis = analyse(step, feed, samples_per_step, steps, meter, enough)
    out = input_record.with_sections(analysis=analysis.to_dict())
    if meter is not None:
        got = analysis.energy_readings
        out = out.with_sections(energy=input_energy(
            got.get("synthetic", ()), got.get("cached", ()), energy, device,
            input_record.stall_fraction, analysis.energy_blocks).to_dict())
    return out


def summary_lines(stats: InputStats | None) -> list[str]:
    """``run``'s lines of the analysis and the input energy (label padded as the others),
    none where the record has neither."""
    from accelbench.data.energy import energy_line
    from accelbench.data.skipping import skipped_line

    record = stats.extra if stats is not None else None  # the sections not typed yet
    out = []
    if (line := skipped_line(record)) is not None:
        out.append(f"{'skipped':<13} {line}")
    if (line := analysis_line(record)) is not None:
        out.append(f"{'data stalls':<13} {line}")
    if (line := energy_line(record)) is not None:
        out.append(f"{'input energy':<13} {line}")
    return out
