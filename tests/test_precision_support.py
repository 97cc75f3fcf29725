"""A mixed precision the CPU has no instructions for is emulated (BERT tiny amp_bf16 ran
at 7 sequences/s against fp32's 560): the record says so, and so do the run summary and
the results and suite tables."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from rich.console import Console

from accelbench.devices.discovery import cpu_flags, precision_support
from accelbench.render import print_result, results_table
from accelbench.result import Result
from tests.conftest import FAULTY_PLUGIN, run_cli
from tests.test_result import _full


def _fake_cpuinfo_plugin(tmp_path: Path, text: str) -> str:
    """The test workloads' plugin, pointing the worker's CPU description at a fake
    ``/proc/cpuinfo`` (the vendor boundary of feature detection): a worker imports the
    plugin that registers its workload, so the pointer rides in that plugin."""
    fake = tmp_path / "cpuinfo"
    fake.write_text(text)
    plugin = tmp_path / "faulty_fake_cpuinfo.py"
    plugin.write_text(Path(FAULTY_PLUGIN).read_text()
                      + "\n\nfrom pathlib import Path  # noqa: E402\n\n"
                      "from accelbench.devices import discovery  # noqa: E402\n\n"
                      f"discovery.CPUINFO = Path({str(fake)!r})\n")
    return str(plugin)


# Abridged /proc/cpuinfo of a Skylake-SP (AVX-512, no bf16) and a Sapphire Rapids (AMX).
SKYLAKE = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold "
           "6148\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl\n\n"
           "processor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n")
SAPPHIRE = ("processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 "
            "amx_tile amx_int8\n")
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd asimdhp fphp sve bf16 svebf16 i8mm\n"


def test_detection_reads_the_flags_of_x86_and_arm() -> None:
    assert "avx512f" in cpu_flags(SKYLAKE) and "avx512_bf16" not in cpu_flags(SKYLAKE)
    bf16 = precision_support("amp_bf16", cpu_flags(SKYLAKE))
    assert bf16 is not None and bf16["native"] is False and bf16["flags"] == []
    assert "emulated" in bf16["note"] and "avx512_bf16/amx_bf16" in bf16["note"]
    fp16 = precision_support("amp_fp16", cpu_flags(SKYLAKE))
    assert fp16 is not None and not fp16["native"] and "avx512_fp16/amx_fp16" in fp16["note"]
    spr = precision_support("amp_bf16", cpu_flags(SAPPHIRE))
    assert spr == {"precision": "amp_bf16", "native": True,
                   "flags": ["avx512_bf16", "amx_bf16"], "note": ""}
    arm = precision_support("amp_bf16", cpu_flags(GRAVITON3))
    assert arm is not None and arm["native"] and arm["flags"] == ["bf16", "svebf16"]
    assert precision_support("amp_fp16", cpu_flags(GRAVITON3))["native"]  # type: ignore[index]
    assert precision_support("fp32", cpu_flags(SKYLAKE)) is None
    assert precision_support("amp_bf16", None) is None  # no /proc/cpuinfo: not known


def _with_machine(machine: dict[str, object], precision: str = "amp_bf16") -> Result:
    data = _full().to_dict()
    data["spec"]["precision"] = precision
    data["machine"] = machine
    data["noise"] = {}
    data["phases"] = None
    return Result.from_dict(data)


def test_the_note_round_trips_and_old_records_are_judged_by_their_isa() -> None:
    emulated = precision_support("amp_bf16", cpu_flags(SKYLAKE))
    r = _with_machine({"precision_support": emulated})
    back = Result.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.precision_note == emulated["note"]  # type: ignore[index]
    assert back.precision_label == "amp_bf16 (emulated)"
    assert back.summary()["precision_note"] == emulated["note"]  # type: ignore[index]
    native = _with_machine({"precision_support": precision_support("amp_bf16",
                                                                     cpu_flags(SAPPHIRE))})
    assert native.precision_note == "" and native.precision_label == "amp_bf16"
    assert native.summary()["precision_note"] is None
    # Records from before the field: an x86 CPU's listed extensions decide; nothing else
    # (an Arm record, a record without a machine, an fp32 case) is called emulated.
    old_x86 = {"cpu": {"arch": "x86_64", "isa": ["avx2", "avx512f"]}}
    assert "emulated" in _with_machine(old_x86).precision_note
    assert _with_machine({"cpu": {"arch": "x86_64", "isa": ["avx512_bf16"]}}).precision_note \
        == ""
    assert _with_machine({"cpu": {"arch": "aarch64", "isa": []}}).precision_note == ""
    assert _with_machine({}).precision_note == ""
    assert _with_machine(old_x86, precision="fp32").precision_note == ""


def test_tables_and_the_run_summary_say_emulated() -> None:
    r = _with_machine({"precision_support": precision_support("amp_bf16",
                                                              cpu_flags(SKYLAKE))})
    fp32 = _with_machine({}, precision="fp32")
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(results_table([fp32, r]))
    narrow = buf.getvalue()
    assert "(emul.)" in narrow and "no bf16/fp16 instructions on this CPU" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 80
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(results_table([r], wide=True))
    assert "amp_bf16 (emulated)" in buf.getvalue()
    buf = io.StringIO()
    print_result(Console(file=buf, width=200, color_system=None), r)
    assert "precision     amp_bf16 is emulated on this CPU" in buf.getvalue()


def _stored_machine(db: Path) -> dict[str, object]:
    con = sqlite3.connect(db)
    try:
        (record,) = con.execute("SELECT record_json FROM results").fetchone()
    finally:
        con.close()
    return json.loads(record)["machine"]  # type: ignore[no-any-return]


def test_a_real_run_stores_the_cpu_s_answer(tmp_path: Path) -> None:
    """A real amp_bf16 run: the record holds what this CPU's flags say (and, with the CPU
    description read from a Skylake's cpuinfo, the run and results say emulated)."""
    here = cpu_flags(Path("/proc/cpuinfo").read_text())
    db = tmp_path / "r.db"
    args = ["run", "test_mlp", "--precision", "amp_bf16", "--iterations", "3", "--no-energy"]
    p = run_cli("--plugin", FAULTY_PLUGIN, *args, db=db)
    assert p.returncode == 0, p.stderr
    support = _stored_machine(db)["precision_support"]
    assert support == precision_support("amp_bf16", here)
    assert ("is emulated" in p.stdout) is (not support["native"])  # type: ignore[index]
    fake = _fake_cpuinfo_plugin(tmp_path, SKYLAKE)
    db2 = tmp_path / "skylake.db"
    p = run_cli("--plugin", fake, *args, db=db2)
    assert p.returncode == 0, p.stderr
    support = _stored_machine(db2)["precision_support"]
    assert isinstance(support, dict) and support["native"] is False
    assert "precision     amp_bf16 is emulated on this CPU" in p.stdout
    listed = run_cli("results", "--wide", db=db2, COLUMNS="250")
    assert listed.returncode == 0, listed.stderr
    assert "amp_bf16 (emulated)" in listed.stdout
    # A suite: its progress line and its table say so.
    suite = run_cli("--plugin", fake, "suite", "quick", "--workload", "test_mlp",
                    "--iterations", "3", "--no-energy", "--suite-id", "emul", db=db2,
                    COLUMNS="100")
    assert suite.returncode == 0, suite.stderr
    assert "test_mlp tiny bs=8 amp_bf16 (emulated) torch: ok" in suite.stderr
    assert "test_mlp tiny bs=8 fp32 torch: ok" in suite.stderr
    assert "(emul.)" in suite.stdout and "no bf16/fp16 instructions on this CPU" in suite.stdout
