"""Roofline analysis: FLOP accounting, measured and theoretical peaks, charts.

* :mod:`~accelbench.roofline.flops`: FLOPs per sample of every workload.
* :mod:`~accelbench.roofline.peaks`: measured peaks (cached in the store).
* :mod:`~accelbench.roofline.theoretical`: the cited table and the CPU estimate.
* :mod:`~accelbench.roofline.breakdown`: per-operator breakdown of a training step.
* :mod:`~accelbench.roofline.report`: roofline data from the store.
* :mod:`~accelbench.roofline.plot`: the charts.

Importing this package imports neither torch nor matplotlib.
"""
