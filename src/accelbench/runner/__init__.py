"""The runner: one isolated worker process per case, the measurement loop, suites."""
