"""Where generated datasets live: ``ACCELBENCH_DATA_DIR``, else ``data/`` in accelbench's
cache directory (``ACCELBENCH_CACHE_DIR`` or the user cache directory)."""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.errors import ConfigError

ENV_DATA_DIR = "ACCELBENCH_DATA_DIR"


def data_root() -> Path:
    """The folder holding generated datasets, one subfolder each.

    Raises:
        ConfigError: ``ACCELBENCH_DATA_DIR`` is blank or names a file.
    """
    env = os.environ.get(ENV_DATA_DIR)
    if env is not None:
        if not env.strip() or (Path(env).exists() and not Path(env).is_dir()):
            raise ConfigError(f"{ENV_DATA_DIR} must name a directory (created if missing), "
                              f"got {env!r}")
        return Path(env)
    from accelbench.cachedir import cache_dir

    return cache_dir() / "data"


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
