"""Training to a quality target (``accelbench train``): scoring, learnable data, recipes,
records; see docs/totarget.md."""
