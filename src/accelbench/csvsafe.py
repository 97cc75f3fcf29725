"""CSV cells safe in a spreadsheet: OWASP's defence against CSV (formula) injection.

Every CSV accelbench writes (``export``, ``results --csv``, ``compare --csv``) passes
its rows through :func:`csv_row`: text a spreadsheet would run as a formula (a tag
``=HYPERLINK(...)``) gets a leading single quote, so it is shown as text.
"""

from __future__ import annotations

from typing import Any

#: First characters that make a spreadsheet read a cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` safe as a CSV cell: None is empty, and text a spreadsheet would run as a
    formula (starting with ``= + - @``, a tab or a carriage return) gets a leading single
    quote, per OWASP's CSV injection advice. Numbers stay numbers (a negative number is
    not text)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every cell of ``row`` through :func:`csv_cell`."""
    return {k: csv_cell(v) for k, v in row.items()}
