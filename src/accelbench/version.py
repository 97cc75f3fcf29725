"""The package version: one definition (pyproject reads it from here)."""

__version__ = "0.2.0"
