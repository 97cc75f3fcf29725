"""The results store: SQLite by default, any SQLAlchemy URL for a team."""

from accelbench.store.db import ResultFilter, Store, default_db_url, open_store, resolve_db_url

__all__ = ["ResultFilter", "Store", "default_db_url", "open_store", "resolve_db_url"]
