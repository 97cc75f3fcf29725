"""Installs the fake GPU knobs of ``tests/fake_tuning.py`` in an accelbench process
(loaded with ``ACCELBENCH_PLUGINS``; state file in ``$ACCELBENCH_FAKE_KNOBS``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fake_tuning import install_from_env  # noqa: E402

install_from_env()
