"""Launchers that run a suite's cases somewhere other than here (a Slurm fleet)."""
