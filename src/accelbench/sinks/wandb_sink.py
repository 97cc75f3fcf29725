"""``--wandb``: each stored case as one W&B run in project ``--wandb-project`` (default
``accelbench``), the same content as :mod:`~accelbench.sinks.mlflow_sink`: the spec as
config, the figures (with the CI's ends) as summary, tags for the suite id, the status and
noise, and an artifact ``case-<result id>`` holding the raw step times, the power
timeline and the full record. ``WANDB_MODE=offline`` keeps everything on disk
(``WANDB_DIR``; ``wandb sync`` uploads it later); W&B's own settings and login apply.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench import jsonout
from accelbench.result import Result
from accelbench.sinks.base import case_metrics, case_tags
from accelbench.store.base import mask_urls


def wandb_tags(result: Result) -> list[str]:
    """Short tags W&B shows beside a run (at most 64 characters each)."""
    tags = [f"status:{result.status}", "noisy" if result.noisy else "quiet",
            f"boundary:{result.energy_boundary}"]
    if result.suite_id:
        tags.append(f"suite:{result.suite_id}"[:64])
    return tags


class WandbSink:
    """Logs each case as one W&B run (``reinit``: one process, many runs)."""

    name = "--wandb"

    def __init__(self, project: str, *, store_label: str | None = None,
                 protected: Sequence[Path] = ()) -> None:
        import wandb  # noqa: F401 - checked importable before anything runs

        from accelbench.report.outputs import check_target

        wandb_dir = os.environ.get("WANDB_DIR")
        # W&B writes its run files into WANDB_DIR/wandb (else ./wandb): never the store.
        check_target(Path(wandb_dir or ".") / "wandb", protected=protected,
                     flag="WANDB_DIR" if wandb_dir else "--wandb (./wandb)", folder=True)
        if wandb_dir:  # the folder itself may hold the store; it must not BE it
            check_target(Path(wandb_dir), protected=protected, flag="WANDB_DIR")
        self.project = project
        self.store_label = store_label
        os.environ.setdefault("WANDB_SILENT", "true")  # its banners are no accelbench output

    def close(self) -> None:
        pass

    def write(self, result: Result) -> None:
        # W&B keeps the command line (sys.argv) in its run files: a store URL's password
        # there is masked (display_url) while the run is written.
        saved = sys.argv
        sys.argv = [mask_urls(arg) for arg in saved]
        try:
            self._write(result)
        finally:
            sys.argv = saved

    def _write(self, result: Result) -> None:
        import wandb

        spec = result.spec
        tags = case_tags(result, self.store_label)
        config: dict[str, Any] = {**spec.to_dict(), "accelbench": {
            key.removeprefix("accelbench."): value for key, value in tags.items()}}
        run = wandb.init(
            project=self.project, name=f"{spec.workload} {spec.size} bs{spec.batch_size} "
            f"{spec.precision} {spec.device} {spec.framework}",
            config=jsonout.jsonable(config), tags=wandb_tags(result),
            group=result.suite_id or None, job_type="benchmark", reinit="create_new",
            dir=os.environ.get("WANDB_DIR") or None)
        try:
            run.summary.update(case_metrics(result))
            artifact = wandb.Artifact(f"case-{result.id}", type="accelbench-case")
            with tempfile.TemporaryDirectory() as tmp:
                files = {
                    "step_times.json": {"sample_unit": result.sample_unit,
                                        "warmup_times_s": list(result.warmup_times_s),
                                        "iteration_times_s": list(result.iteration_times_s)},
                    "record.json": result.to_dict(),
                }
                if result.power_timeline:
                    files["power_timeline.json"] = result.power_timeline
                for name, content in files.items():
                    path = Path(tmp) / name
                    path.write_text(json.dumps(jsonout.jsonable(content)), encoding="utf-8")
                    artifact.add_file(str(path), name=name)
                run.log_artifact(artifact)
        finally:
            run.finish(exit_code=0 if result.status == "ok" else 1)
