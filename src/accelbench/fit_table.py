"""Tables that keep within the terminal's width.

Rich squeezes every column of a table wider than the terminal down to a few characters
(``results --wide`` at 120 columns read ``thr…``, ``95…``). A :class:`FitTable` instead
measures each column's natural width at render time and, while the table is too wide,
leaves out the column of lowest priority: first the axes (size, precision ...) whose
value is the same in every row (named in one line under the table), then the least
important others (named too, with where to read them). Columns of priority
:data:`KEEP`, and axes on which the rows differ, are never left out; a free-text column
(``fold_min``) folds onto more lines before anything is left out for it.
Legend and footer lines follow the table as plain text, wrapped at the terminal's width.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.table import Table
from rich.text import Text

#: Priority of a column that is never left out.
KEEP = 1000


@dataclass(kw_only=True, slots=True)
class Col:
    """One column: its header, its cells (rich markup) and how much it matters."""

    header: str
    cells: list[str] = field(default_factory=list)
    priority: int = 50
    """Higher is kept longer; :data:`KEEP`: never left out."""
    justify: Literal["left", "right"] = "left"
    fold_min: int | None = None
    """A free-text column: folds down to this many characters (None: never wraps)."""
    same_label: str = ""
    """How to name the column's value when every row holds the same one (``size``)."""
    axis: bool = False
    """An axis of the case (size, precision, framework ...): never left out where the
    rows differ on it (nothing else tells two such rows apart)."""

    def natural(self) -> int:
        """The widest line of the header and the cells, in terminal cells."""
        widest = cell_len(self.header)
        for cell in self.cells:
            for line in Text.from_markup(cell).plain.splitlines() or [""]:
                widest = max(widest, cell_len(line))
        return widest

    def need(self) -> int:
        """The width the column cannot do with less of."""
        n = self.natural()
        return min(n, max(self.fold_min, cell_len(self.header))) if self.fold_min else n

    def same_value(self) -> str | None:
        """The plain value of every cell, when there are cells and they all agree."""
        values = {Text.from_markup(c).plain.replace("\n", " ") for c in self.cells}
        return values.pop() if len(values) == 1 and self.cells else None


@dataclass(kw_only=True, slots=True)
class FitTable:
    """A table that leaves out low-priority columns rather than exceed the width."""

    columns: list[Col]
    title: str | None = None
    wide: bool = False
    """Boxed with padding (``--wide``), else the narrow borderless style."""
    legend: list[str] = field(default_factory=list)
    """Plain lines printed after the table."""
    left_out_hint: str = ""
    """Where to read a column left out (``accelbench results show ID``)."""

    def add_row(self, *cells: str) -> None:
        """Append a row (one cell a column)."""
        for col, cell in zip(self.columns, cells, strict=True):
            col.cells.append(cell)

    def _overhead(self, n: int) -> int:
        return 3 * n + 1 if self.wide else max(n - 1, 0)

    def fit(self, width: int) -> tuple[list[Col], list[Col]]:
        """The columns kept at ``width`` (in their order) and those left out."""
        kept = list(self.columns)
        left: list[Col] = []

        def rank(c: Col) -> tuple[int, int]:
            # An axis holding one value in every row is a label named once under the
            # table at no loss; a measurement equal in every row is a coincidence.
            same = c.axis and c.same_value() is not None and len(c.cells) > 1
            return (c.priority - (KEEP if same else 0), -self.columns.index(c))

        while sum(c.need() for c in kept) + self._overhead(len(kept)) > width:
            droppable = [c for c in kept if c.priority < KEEP
                         and not (c.axis and c.same_value() is None)]
            if not droppable:
                break
            worst = min(droppable, key=rank)
            kept.remove(worst)
            left.append(worst)
        return kept, left

    def table(self, kept: Sequence[Col]) -> Table:
        """The rich table of the ``kept`` columns."""
        from rich import box

        if self.wide:
            t = Table(title=self.title, header_style="bold", expand=False)
        else:
            t = Table(title=self.title, header_style="bold", box=box.SIMPLE_HEAD,
                      padding=(0, 0), show_edge=False, title_justify="left")
        for c in kept:
            t.add_column(c.header, justify=c.justify, no_wrap=c.fold_min is None,
                         overflow="fold")
        for i in range(len(kept[0].cells) if kept else 0):
            t.add_row(*(c.cells[i] for c in kept))
        return t

    def footer(self, left: Sequence[Col]) -> list[str]:
        """The lines naming the columns left out: values shared by every row, then the
        others with where to read them."""
        lines = []
        same = [(c, v) for c in left if (v := c.same_value()) is not None]
        if same:
            lines.append("every row: " + ", ".join(
                f"{c.same_label or c.header} {v}" for c, v in same))
        other = [c.header for c in left if c.same_value() is None]
        if other:
            lines.append(f"left out to fit the terminal: {', '.join(other)}"
                         + (f" ({self.left_out_hint})" if self.left_out_hint else ""))
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions
                         ) -> Iterator[Any]:
        kept, left = self.fit(options.max_width)
        yield self.table(kept)
        for line in [*self.legend, *self.footer(left)]:
            yield Text(line, overflow="fold")


def copy_cols(cols: Sequence[Col]) -> list[Col]:
    """Fresh copies of ``cols`` (headers and settings, no cells)."""
    return [dataclasses.replace(c, cells=[]) for c in cols]
