"""Reports, comparisons, recommendations and exports, read from the results store only.

Nothing here reruns a measurement or imports a framework: every number is
recomputed from what :class:`~accelbench.result.Result` records hold (raw
iteration times included).

Modules:
    rows: one flat, labelled row per stored case (the shape every view shares).
    cost: price, electricity and carbon rates; cost and carbon per million samples.
    reference: the paper's published results (Wang et al. 2020, Table 10).
    compare: ratios of two selections of results with bootstrap confidence intervals.
    recommend: ranking device x precision x batch-size options for a workload.
    export: CSV, JSON and Parquet tables of results and raw samples.
    plots: matplotlib (Agg) figures.
    html: the self-contained HTML report and its Markdown summary.
"""
