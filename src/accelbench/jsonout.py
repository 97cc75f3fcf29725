"""Strict JSON out: every document accelbench prints or writes is valid JSON (RFC 8259).

Python's :mod:`json` writes ``NaN`` and ``Infinity`` for non-finite floats, which
no other JSON reader accepts; here they become ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def jsonable(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (containers copied)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """:func:`json.dumps` that never emits ``NaN``/``Infinity`` (they become ``null``)."""
    return json.dumps(jsonable(obj), allow_nan=False, **kwargs)
