"""Every training result carries its FLOPs per sample, achieved FLOP/s and, given a peak, MFU."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

import accelbench
from accelbench import api
from accelbench.backends import workload_flops
from accelbench.store import open_store
from accelbench.store.opbench import Peak


def test_result_has_flops_and_no_mfu_without_a_peak(db_path: Path) -> None:
    r = accelbench.run("vgg16", size="tiny", iterations=4)
    assert r.status == "ok", r.error
    expected = workload_flops("vgg16", "tiny", r.spec.batch_size)
    assert r.flop_per_sample == pytest.approx(expected.train_flop_per_sample)
    assert r.forward_flop_per_sample == pytest.approx(expected.forward_flop_per_sample)
    assert r.flop_method == expected.method
    assert r.achieved_flop_per_s == pytest.approx(r.flop_per_sample * r.stats.samples_per_s)  # type: ignore[union-attr,operator]
    assert r.mfu is None and r.peak_flop_per_s is None
    assert r.summary()["mfu"] is None


def test_mfu_uses_the_stored_peak_of_that_precision(db_path: Path) -> None:
    with open_store(str(db_path)) as st:
        for precision, value in (("fp32", 2.0e11), ("bf16", 8.0e11)):
            st.save_peak(Peak(device="cpu", precision=precision, value=value,
                               unit="FLOP/s", method="gemm sweep (test)",
                               hostname=socket.gethostname()))
    # transformer, not lstm: oneDNN has no bf16 LSTM on CPUs without AVX-512 BF16.
    _sid, results = accelbench.suite("quick", workloads=["transformer"], iterations=4)
    by_precision = {r.spec.precision: r for r in results}
    fp32, bf16 = by_precision["fp32"], by_precision["amp_bf16"]
    assert fp32.peak_flop_per_s == 2.0e11 and bf16.peak_flop_per_s == 8.0e11
    assert fp32.mfu == pytest.approx(fp32.achieved_flop_per_s / 2.0e11)  # type: ignore[operator]
    assert bf16.mfu == pytest.approx(bf16.achieved_flop_per_s / 8.0e11)  # type: ignore[operator]
    # Same shape, counted once: both precisions carry the same FLOPs.
    assert fp32.flop_per_sample == bf16.flop_per_sample
    assert fp32.flop_method == bf16.flop_method == "flop_counter"
    with open_store(str(db_path)) as st:
        back = st.get(fp32.id)
    assert back is not None and back.mfu == pytest.approx(fp32.mfu)


def test_mfu_keeps_its_peak_when_a_later_loaded_peak_is_measured(db_path: Path) -> None:
    host = socket.gethostname()
    quiet = {"quiet": True, "other_cores": 0.05, "load_avg_1m": 0.2, "window_s": 3.0}
    loaded = {"quiet": False, "other_cores": 1.6, "load_avg_1m": 3.5, "window_s": 3.0}
    with open_store(str(db_path)) as st:
        first = st.save_peak(Peak(device="cpu", precision="fp32", value=1.51e11,
                                   unit="FLOP/s", method="gemm sweep (test)", hostname=host,
                                   details={"noise": quiet}))
    before = accelbench.run("lstm", size="tiny", iterations=4, energy=False, idle_s=0)
    assert before.status == "ok", before.error
    assert before.peak_flop_per_s == 1.51e11 and before.mfu is not None
    info = before.machine["mfu_peak"]
    assert info["kind"] == "measured_quiet" and info["peak_id"] == first.id
    assert "best of 1 quiet measurement" in info["source"]
    # `peaks` runs again while the machine is busy: 2.2x lower, and the newest.
    with open_store(str(db_path)) as st:
        st.save_peak(Peak(device="cpu", precision="fp32", value=6.8e10, unit="FLOP/s",
                           method="gemm sweep (test)", hostname=host,
                           details={"noise": loaded}))
        stored = st.get(before.id)
        again = api.attach_peak(dataclasses.replace(before, peak_flop_per_s=None), st)
    assert stored is not None and stored.mfu == pytest.approx(before.mfu)
    assert again.mfu == pytest.approx(before.mfu)
    after = accelbench.run("lstm", size="tiny", iterations=4, energy=False, idle_s=0)
    assert after.peak_flop_per_s == 1.51e11  # a new result too: the quiet peak, not the latest
    assert after.machine["mfu_peak"]["peak_id"] == first.id
