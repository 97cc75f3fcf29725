"""Running cases: the parent's loop over a suite's cases (orchestrate), one isolated
worker process per case (process, child, isolate, launch), and the worker's side
(worker, request, record, metering, measure, noise, ranks)."""
