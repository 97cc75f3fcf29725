"""Datasets on disk for ``--data generated|PATH``: layouts, where they live, how they are
written and checked, and the stall timing of the step's wait for its next batch.

Framework-neutral: nothing here imports torch or jax. One sample's work (decode and
augment, token windows) is :mod:`~accelbench.data.transforms`', which both backends call;
each backend feeds its step (:mod:`accelbench.backends.torch.input`: a ``DataLoader``;
:mod:`accelbench.backends.jax.input`: :mod:`~accelbench.data.loader`'s ``BatchLoader``).

- :mod:`~accelbench.data.layouts`: what a workload reads from disk (images in class folders
  at its resolution, or token shards with its vocabulary and window).
- :mod:`~accelbench.data.store`: where generated datasets live (the cache directory).
- :mod:`~accelbench.data.generate`: writing a generated dataset (JPEGs, uint16 shards).
- :mod:`~accelbench.data.atomic`: every dataset folder put in place whole or not at all.
- :mod:`~accelbench.data.check`: a user's PATH checked against the workload up front.
- :mod:`~accelbench.data.stall`: the per-step wait and the record's ``input`` section.
- :mod:`~accelbench.data.transforms`: one sample made ready, in numpy (both frameworks).
- :mod:`~accelbench.data.loader`: batches of numpy samples from spawned worker processes.
"""
