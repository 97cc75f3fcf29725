"""What to run: a case prepared and checked (cases), named suites, time estimates and
the model facts (parameters, FLOPs) counted once and cached."""
