"""Roofline analysis: measured and theoretical peaks, per-operator breakdowns, charts.

(FLOPs per sample are counted by each backend, e.g. :mod:`accelbench.backends.torch.flops`,
and cached by :mod:`accelbench.planning.facts`.)

* :mod:`~accelbench.roofline.peaks`: measured peaks (cached in the store).
* :mod:`~accelbench.roofline.theoretical`: the cited table and the CPU estimate.
* :mod:`~accelbench.roofline.breakdown`: per-operator breakdown of a training step.
* :mod:`~accelbench.roofline.data`: roofline data from the store.
* :mod:`~accelbench.roofline.plot`: the charts.

Importing this package imports no framework and not matplotlib.
"""

#: Why a point can sit above its roof: the roof is a measured peak, and one measured
#: while other work ran (or on another clock or driver) is too low.
ABOVE_ROOF_REASON = "peak measured under load or stale: run `accelbench peaks --measure`"
