"""Framework backends: build a workload's training step on a device and time it."""
