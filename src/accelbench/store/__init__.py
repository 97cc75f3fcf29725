"""The results store: SQLite by default, any SQLAlchemy URL for a team.

:class:`Store` is the one door: every query a command or report makes is one of its
methods; nothing outside this package sees SQL or the engine.
"""

from accelbench.store.db import (
    ResultFilter,
    Store,
    check_store,
    default_db_url,
    open_store,
    resolve_db_url,
)
from accelbench.store.health import UnusableStoreError

__all__ = ["ResultFilter", "Store", "UnusableStoreError", "check_store", "default_db_url",
           "open_store", "resolve_db_url"]
