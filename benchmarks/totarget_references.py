"""Reference runs of the default to-target recipes: samples-to-target of seeds 1000..1009
(seeds no ``accelbench train`` run starts from), written into the package's
``totarget/references.json``, against which ``train`` checks a set of runs the way MLPerf
checks submissions against its reference convergence points (docs/totarget.md).

Each run reads its data as ``accelbench train`` does (the dataset on disk, through the
input pipeline: ``feed`` ``files``). The default framework's runs are stored under
``WORKLOAD/SIZE``, another framework's under ``WORKLOAD/SIZE@FRAMEWORK``; each entry records
when, where, the load and the command. Samples-to-target do not depend on the machine's
load (only the times do, and no time is stored).

    python benchmarks/totarget_references.py                        # every default recipe
    python benchmarks/totarget_references.py --workload transformer --runs 10
    python benchmarks/totarget_references.py --workload transformer --framework jax
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from accelbench.errors import ConfigError
from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.totarget.energy import Metering
from accelbench.totarget.outcome import Limits
from accelbench.totarget.recipes import RECIPES, recipe_for
from accelbench.totarget.references import reference_key
from accelbench.totarget.run import fitted, run_seeds, trainers

OUT = Path(__file__).resolve().parents[1] / "src" / "accelbench" / "totarget" / "references.json"
FIRST_SEED = 1000
EVAL_EVERY = 512


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workload", action="append", default=None)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--max-time", type=float, default=300.0)
    ap.add_argument("--framework", default=DEFAULT_FRAMEWORK, choices=sorted(trainers()))
    a = ap.parse_args()
    names = a.workload or sorted({w for w, s in RECIPES if s == "tiny"})
    for name in names:
        recipe = recipe_for(name, "tiny")
        try:
            recipe = fitted(a.framework, recipe)
        except ConfigError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        limits = Limits(target=recipe.auto_target(), eval_every=EVAL_EVERY,
                        max_time_s=a.max_time, max_samples=10_000_000)
        load = Path("/proc/loadavg").read_text().split()[:3]
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        recs = run_seeds(recipe, limits, seeds=a.runs, metering=Metering(idle_s=0),
                         framework=a.framework, first_seed=FIRST_SEED)
        reached = [r.samples_to_target for r in recs if r.samples_to_target is not None]
        print(f"{name} ({a.framework}): {len(reached)}/{len(recs)} reached; "
              f"samples-to-target {reached}", flush=True)
        if len(reached) < len(recs):
            sys.exit(f"{name}: a reference run did not reach its target; nothing written")
        end = Path("/proc/loadavg").read_text().split()[:3]
        command = (f"python benchmarks/totarget_references.py --workload {name} --runs "
                   f"{a.runs}" + ("" if a.framework == DEFAULT_FRAMEWORK
                                  else f" --framework {a.framework}"))
        # read again just before writing: another framework's process may have written
        data = json.loads(OUT.read_text()) if OUT.exists() else {}
        data[reference_key(name, "tiny", a.framework)] = {
            "samples_to_target": reached, "eval_every": EVAL_EVERY,
            "seeds": f"{FIRST_SEED}-{FIRST_SEED + a.runs - 1}",
            "framework": a.framework, "feed": recipe.feed,
            "measured": f"{when}, shared 2-core VM ({platform.machine()}), load "
                        f"{' '.join(load)} at the start, {' '.join(end)} at the end, "
                        f"feed: {recipe.feed} (read from disk), {command}"}
        OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
