"""accelbench's cache directory: ``ACCELBENCH_CACHE_DIR``, else the user cache directory
(model facts counted here, generated datasets)."""

from __future__ import annotations

import os
from pathlib import Path

from accelbench.errors import ConfigError

ENV_CACHE_DIR = "ACCELBENCH_CACHE_DIR"


def cache_dir() -> Path:
    """``ACCELBENCH_CACHE_DIR`` or the user cache directory.

    Raises:
        ConfigError: the variable is blank or names something that is not a directory.
    """
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        if not env.strip() or (Path(env).exists() and not Path(env).is_dir()):
            raise ConfigError(f"{ENV_CACHE_DIR} must name a directory (it is created if "
                              f"missing), got {env!r}")
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("accelbench", appauthor=False))
