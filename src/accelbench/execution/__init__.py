"""Running cases: the parent's loop over a suite's cases (orchestrate), one isolated
worker process per case (process: started, watched, its outcome a Result; launch: a case on
many ranks; the processes themselves are :mod:`accelbench.isolation`'s), and the worker's
side (worker, request, record, metering, measure, noise, ranks)."""
