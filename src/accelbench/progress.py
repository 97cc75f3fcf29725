"""Live progress for long work (rich), silent for scripts (``--quiet``, non-TTY)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from accelbench.api import SuiteEvent
from accelbench.execution.process import Progress as CaseProgress
from accelbench.planning.cases import Case
from accelbench.verdicts import verdict_label


def _case_label(case: Case) -> str:
    s = case.spec
    return f"{s.workload} {s.size} bs={s.batch_size} {s.precision} {s.device}"


class ProgressDisplay:
    """Progress bars on stderr when it is a terminal and the user did not ask for quiet.

    Use as a context manager; :meth:`suite_event` and :meth:`case_progress` are the
    callbacks of :func:`accelbench.api.suite` and :func:`accelbench.api.run`.
    """

    def __init__(self, console: Console, *, enabled: bool) -> None:
        self.enabled = enabled and console.is_terminal
        #: Not a terminal (a log file, CI): no bars, but one plain line per finished case.
        self.lines = enabled and not console.is_terminal
        self._console = console
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not self.enabled,
        )
        self._suite_task: TaskID | None = None
        self._case_task: TaskID | None = None
        self._max_time_s = 60.0

    def __enter__(self) -> ProgressDisplay:
        self._progress.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.__exit__(exc_type, exc, tb)

    def begin(self, label: str) -> None:
        """Show one case whose plan is not known yet (``accelbench run``)."""
        self._case_task = self._progress.add_task(label, total=None, detail="starting")

    def start_case(self, case: Case) -> None:
        self._max_time_s = case.spec.policy.max_time_s
        total = case.spec.policy.iterations or case.spec.policy.max_iterations
        if self._case_task is None:
            self._case_task = self._progress.add_task(_case_label(case), total=total, detail="")
        else:
            self._progress.reset(
                self._case_task, total=total, description=_case_label(case), detail=""
            )

    def case_progress(self, p: CaseProgress) -> None:
        if self._case_task is None:
            return
        if p.phase == "measure" and p.iterations:
            # ETA by the stricter of the iteration and time budgets.
            task = self._progress.tasks[self._case_task]
            if task.total is None:
                self._progress.update(
                    self._case_task,
                    detail=f"{p.iterations} it  {p.samples_per_s:,.1f} samples/s",
                )
                return
            total = task.total
            time_frac = min(1.0, p.elapsed_s / self._max_time_s) if self._max_time_s else 0.0
            done = max(p.iterations, int(time_frac * total))
            self._progress.update(
                self._case_task,
                completed=min(done, total),
                detail=f"{p.iterations} it  {p.samples_per_s:,.1f} samples/s",
            )
        else:
            self._progress.update(self._case_task, detail=p.phase)

    def suite_event(self, ev: SuiteEvent) -> None:
        if ev.kind == "plan":
            self._suite_task = self._progress.add_task("suite", total=ev.total, detail="")
        elif ev.kind == "skip" and self._suite_task is not None:
            self._progress.advance(self._suite_task)
            self._progress.update(self._suite_task, detail="resumed: skipping stored cases")
        elif ev.kind == "start" and ev.case is not None:
            self.start_case(ev.case)
        elif ev.kind == "progress" and ev.progress is not None:
            self.case_progress(ev.progress)
        elif ev.kind == "done" and self._suite_task is not None and ev.result is not None:
            self._progress.advance(self._suite_task)
            if not (self.enabled or self.lines):
                return
            r = ev.result
            tput = f"{r.samples_per_s:,.1f} {r.sample_unit}s/s" if r.samples_per_s else ""
            noisy = f" (flagged: {verdict_label(r.noise) or 'noisy'})" if r.noisy else ""
            line = (f"[{ev.index + 1}/{ev.total}] {r.spec.workload} {r.spec.size} "
                    f"bs={r.spec.batch_size} {r.precision_label} {r.spec.framework}"
                    f"{'' if r.spec.data == 'synthetic' else ' data ' + r.spec.data}: "
                    f"{r.status} {tput}{noisy}").rstrip()
            console = self._progress.console if self.enabled else self._console
            console.print(line, highlight=False, markup=False)
