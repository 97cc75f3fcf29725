"""``accelbench report``: a store filled by real tiny runs, rendered and opened in Chromium.

The HTML is loaded in headless Chromium driven over the DevTools protocol
(websocket-client): console errors, exceptions, failed loads and network
requests are collected from the protocol's events, every ``<img>`` is checked
for a decoded image, and a full-page screenshot is taken. A deliberately broken
page shows that the checks do detect a broken image and a console error.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import types
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from accelbench import api
from accelbench.report.html import build_report, write_report
from accelbench.store import open_store
from tests.conftest import FAULTY_PLUGIN, run_cli
from tests.phase_records import make_phases, with_phases
from tests.test_compare import make_result

XSS_TAG = "<script>alert(1)</script>"
XSS_WORKLOAD = "my<img src=x onerror=alert(2)>net"


# -- headless Chromium over the DevTools protocol ---------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Page:
    """One headless Chromium with one page, spoken to over its DevTools websocket."""

    def __init__(self, exe: str, profile: str) -> None:
        import websocket

        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its helper processes too are ended in close()
        )
        port = None
        deadline = time.monotonic() + 30
        assert self.proc.stderr is not None
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                port = int(match.group(1))
            elif not line and self.proc.poll() is not None:
                break
        if port is None:
            self.close()
            raise RuntimeError("headless Chromium did not start")
        pages: list[dict[str, Any]] = []
        for _ in range(100):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as resp:
                pages = [t for t in json.load(resp) if t["type"] == "page"]
            if pages:
                break
            time.sleep(0.1)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60)
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self.events.append(msg)

    def wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv()))

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        # The whole group: Chromium's helpers (renderer, crash handler) may outlive the
        # browser process and still write into the profile while it is being removed.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:
                time.sleep(0.2)  # helpers ending after the browser


_PROBE = """(() => ({
  images: [...document.images].map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0})),
  scripts: document.scripts.length,
  text: document.body.innerText,
  height: document.documentElement.scrollHeight,
}))()"""


def inspect_page(url: str, screenshot: Path | None = None) -> dict[str, Any]:
    """Load ``url``; return its images, script count, text, errors, requests; screenshot it."""
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI"):  # .ci/run installs it: missing there is a failure
            pytest.fail("headless Chromium not installed in CI (apt-get install chromium)")
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    pytest.importorskip("websocket", reason="needs websocket-client")
    with tempfile.TemporaryDirectory() as profile:
        page = _Page(exe, profile)
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                page.call(f"{domain}.enable")
            page.call("Page.navigate", url=url)
            page.wait_for("Page.loadEventFired")
            info = page.call("Runtime.evaluate", expression=_PROBE, returnByValue=True)
            probe: dict[str, Any] = info["result"]["value"]
            if screenshot is not None:
                page.call("Emulation.setDeviceMetricsOverride", width=1400,
                          height=min(int(probe["height"]), 16000), deviceScaleFactor=1,
                          mobile=False)
                shot = page.call("Page.captureScreenshot", format="png",
                                 captureBeyondViewport=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            errors = []
            for e in page.events:
                method, p = e.get("method"), e.get("params", {})
                if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    errors.append(f"console.{p['type']}: {p.get('args')}")
                elif method == "Runtime.exceptionThrown":
                    errors.append(f"exception: {p['exceptionDetails']}")
                elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                    errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
                elif method == "Network.loadingFailed":
                    errors.append(f"load failed: {p.get('errorText')}")
            probe["errors"] = errors
            probe["requests"] = [
                e["params"]["request"]["url"] for e in page.events
                if e.get("method") == "Network.requestWillBeSent"
            ]
            return probe
        finally:
            page.close()


# -- the store: real tiny runs plus hand-built GPU records -------------------------------


def _timeline(base_w: float) -> dict[str, Any]:
    t = [i * 0.05 for i in range(60)]
    return {"gpu:0 (nvml)": {"t_s": t, "power_w": [base_w + 20 * ((i % 10) / 10) for i in
                                                   range(60)]},
            "cpu-package (rapl)": {"t_s": t, "power_w": [45.0 + (i % 3) for i in range(60)]}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("report") / "report.db"

    def suite() -> Any:
        return api.suite("quick", workloads=["test_mlp"], plugins=[FAULTY_PLUGIN],
                         max_time=0.3, db=str(db))

    def tagged() -> Any:
        # A TDP gives this machine (no power sensor) a real, labelled energy estimate.
        return run_cli("--plugin", FAULTY_PLUGIN, "run", "test_mlp", "--size", "tiny",
                       "--max-time", "0.3", "--tag", XSS_TAG, "--cpu-tdp-w", "65", db=db)

    def lstm() -> Any:
        # Batch 64 fp32 is a published shape: the reference section must pair it.
        return run_cli("run", "lstm", "--size", "tiny", "--batch-size", "64", "--max-time",
                       "0.3", db=db)

    with ThreadPoolExecutor(3) as pool:
        jobs = [pool.submit(f) for f in (suite, tagged, lstm)]
        _, measured = jobs[0].result()
        procs = [jobs[1].result(), jobs[2].result()]
    assert [r.status for r in measured] and all(r.status == "ok" for r in measured)
    for proc in procs:
        assert proc.returncode == 0, proc.stderr
    with open_store(str(db)) as st:
        # The two GPU cases were measured with --phases (every energy status among them).
        st.save(with_phases(make_result("gpu32", avg_power_w=250.0, timeline=_timeline(240.0),
                                        times=(0.2, 0.21, 0.2, 0.22, 0.2, 0.2))))
        st.save(with_phases(
            make_result("gpu16", precision="amp_fp16", avg_power_w=260.0,
                        timeline=_timeline(250.0), times=(0.1, 0.11, 0.1, 0.1, 0.12, 0.1)),
            make_phases(forward_s=0.025, backward_s=0.05, optimizer_s=0.02, step_s=0.1,
                        scale_j=0.6, optimizer_energy="measured")))
        st.save(make_result("gpujax", framework="jax", compile_s=41.5, avg_power_w=255.0,
                            times=(0.15, 0.16, 0.15, 0.15, 0.17, 0.15)))
        st.save(make_result("gpuoom", batch=256, status="oom"))
        st.save(make_result("cpuest", device="cpu", workload=XSS_WORKLOAD, avg_power_w=65.0,
                            energy_source="estimate", sample_unit="sample"))
        st.save(make_result("timeout1", workload="vgg16", status="timeout"))
    return db


@pytest.fixture(scope="module")
def report_dir(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-out") / "rep"
    proc = run_cli("report", "--out", str(out), "--price-per-hour", "3.6",
                   "--electricity-price", "0.30", "--carbon-intensity", "400",
                   "--currency", "USD", db=store)
    assert proc.returncode == 0, proc.stderr
    assert "index.html" in proc.stdout
    return out


def test_writes_html_markdown_and_figures(report_dir: Path) -> None:
    figures = {p.name for p in (report_dir / "figures").iterdir()}
    for stem in ("throughput", "energy", "speedup", "frameworks", "power_000", "power_001",
                 "phases_time", "phases_energy"):
        assert {f"{stem}.png", f"{stem}.svg"} <= figures, figures
    assert (report_dir / "figures" / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (report_dir / "figures" / "energy.svg").read_bytes()[:2000]
    md = (report_dir / "summary.md").read_text()
    assert "| device | workload |" in md and "cost/Msample" in md
    phases = md[md.index("## Where the step's time and energy go (phases)"):]
    assert "| forward |" in phases and "indistinguishable from 0" in phases
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and XSS_TAG not in md
    # J/sample with its 95% bound: the TDP estimate's 50%, and the hand-built records
    # (stored as before bounds existed) say they have none.
    summary = md[:md.index("## Figures")] if "## Figures" in md else md
    assert re.search(r"J/sample \+- 50% \(95% bound\)", summary), summary
    assert "(error bound unavailable)" in summary


def test_html_is_escaped_and_self_contained(report_dir: Path) -> None:
    html = (report_dir / "index.html").read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html and "<img src=x" not in html
    # No network resources: every src/href is a data: URI, a fragment or a relative file.
    for ref in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert ref.startswith(("data:image/png;base64,", "#", "figures/")), ref
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html


def test_report_content(report_dir: Path) -> None:
    html = (report_dir / "index.html").read_text()
    text = re.sub(r"<[^>]+>", " ", html)
    text = re.sub(r"\s+", " ", text)
    # Status of failed cases, shown as such.
    assert "st-oom" in html and "st-timeout" in html
    # Unavailable energy is labelled, never printed as 0; estimated energy is labelled.
    assert "unavailable" in text and "estimated" in text and "measured" in text
    assert " 0 J/" not in text
    # Cost and carbon columns with their units.
    assert "cost USD / Msample" in text and "gCO2 / Msample" in text
    # The lstm run next to the published rows for lstm, batch 64, fp32.
    ref = text[text.index("Published reference results"):text.index("Machines and software")]
    assert "Published figures, not your measurements" in ref
    assert "lstm" in ref and "Tesla V100" in ref and "817" in ref
    assert "tiny" in ref  # says the user's model size differs
    # Machine and software metadata.
    assert "gpu-box" in text and "NVIDIA A100-SXM4-40GB" in text and "PyTorch" in text
    # No roofline measurements in this store, whether or not the roofline module exists.
    assert "no roofline data: run accelbench roofline" in text
    assert "MFU (model FLOP utilisation) is not recorded" in text
    # The framework comparison: JAX over torch on the same case, with its CI and compile time.
    start = text.index("Frameworks: JAX relative to PyTorch")
    fw = text[start:text.index("Roofline", start)]
    assert "resnet50 paper bs=64" in fw and "41.5" in fw and "[" in fw


def test_opens_in_headless_chromium(report_dir: Path) -> None:
    shot = report_dir / "screenshot.png"
    page = inspect_page((report_dir / "index.html").as_uri(), screenshot=shot)
    assert page["errors"] == []
    assert len(page["images"]) >= 5
    assert all(img["ok"] for img in page["images"]), page["images"]
    assert page["scripts"] == 0
    assert XSS_TAG in page["text"] and XSS_WORKLOAD in page["text"]
    # The energy column as the browser shows it: the bound, or that there is none.
    assert re.search(r"J/sample \+- 50% \(95% bound\)", page["text"]), page["text"]
    assert "(error bound unavailable)" in page["text"]
    assert all(u.startswith(("file://", "data:")) for u in page["requests"]), page["requests"]
    # The phases (--phases): both stacked-bar figures decoded, the section and its table.
    phase_imgs = [i for i in page["images"] if "(--phases)" in i["alt"]]
    assert len(phase_imgs) == 2 and all(i["ok"] for i in phase_imgs), page["images"]
    text = page["text"]
    section = text[text.index("Where the step's time and energy go (phases)"):
                   text.index("Power timelines")]
    assert "No power sensor resolves a phase inside one step" in section
    assert "resnet50 paper bs=64 amp_fp16 cuda:0" in section
    assert "indistinguishable" in section and "measured" in section
    assert "outside the measured step" in section
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def test_the_browser_checks_catch_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img alt="gone" src="missing.png">'
                    '<script>console.error("boom")</script></body></html>')
    info = inspect_page(page.as_uri())
    assert [img["ok"] for img in info["images"]] == [False]
    assert any("boom" in e for e in info["errors"])
    assert any("load failed" in e or "missing.png" in e for e in info["errors"])


def test_roofline_section_plots_points_when_the_module_exists(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = {"device": "cuda:0", "precision": "fp32", "peak_flop_per_s": 19.5e12,
             "peak_bytes_per_s": 1.5e12}
    points = [
        {**point, "label": "matmul 4096", "kind": "op", "intensity_flop_per_byte": 680.0,
         "achieved_flop_per_s": 17e12},
        {**point, "label": "resnet50", "kind": "model", "intensity_flop_per_byte": 40.0,
         "achieved_flop_per_s": 6e12},
    ]
    seen: list[Any] = []

    def roofline_points(st: Any) -> list[dict[str, Any]]:
        seen.append(st)
        return points

    fake = types.ModuleType("accelbench.roofline.data")
    fake.roofline_points = roofline_points  # type: ignore[attr-defined]
    pkg = types.ModuleType("accelbench.roofline")
    pkg.__path__ = []
    pkg.report = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "accelbench.roofline", pkg)
    monkeypatch.setitem(__import__("sys").modules, "accelbench.roofline.data", fake)
    with open_store(str(store)) as st:
        data = build_report(st.query(), store=st, store_url=st.url)
    assert seen and data.charts["roofline"] is not None
    files = write_report(data, tmp_path / "r")
    assert (tmp_path / "r" / "figures" / "roofline.svg") in files.figures


def test_rewrite_removes_only_its_own_stale_figures(store: Path, tmp_path: Path) -> None:
    figs = tmp_path / "r" / "figures"
    figs.mkdir(parents=True)
    (figs / "power_099.png").write_bytes(b"stale")
    (figs / "my-notes.txt").write_text("keep me")
    with open_store(str(store)) as st:
        data = build_report(st.query(workload_filter("lstm")), store_url=st.url)
    write_report(data, tmp_path / "r")
    assert not (figs / "power_099.png").exists()
    assert (figs / "my-notes.txt").read_text() == "keep me"
    assert (figs / "throughput.png").exists()


def workload_filter(name: str) -> Any:
    from accelbench.store import ResultFilter

    return ResultFilter(workload=name)


def test_no_results_is_an_error(store: Path, tmp_path: Path) -> None:
    # A workload the store does not hold: said in one line, with what it does hold.
    proc = run_cli("report", "--out", str(tmp_path / "x"), "--workload", "nothing", db=store)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    # Checked like run checks it (issue 23): unknown, with what the store holds.
    assert line.startswith("accelbench: error: --workload: unknown workload 'nothing'")
    assert "the store holds: " in line and "lstm" in line and "\n" not in line
    # A typo: the close match.
    proc = run_cli("report", "--out", str(tmp_path / "x"), "--workload", "lstn", db=store)
    assert proc.returncode == 2 and "did you mean lstm" in proc.stderr.strip()
    # The workload exists but other filters exclude everything.
    proc = run_cli("report", "--out", str(tmp_path / "x"), "--workload", "lstm", "--size",
                   "paper", db=store)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "accelbench: error: no results match the filters: nothing to " \
        "report"
    assert not (tmp_path / "x").exists()


def test_bad_report_options_are_refused(store: Path, tmp_path: Path) -> None:
    for args in (("--price-per-hour", "nan"), ("--electricity-price", "-1"),
                 ("--carbon-intensity", "inf"), ("--limit", "0"), ("--out", ""),
                 ("--currency", "")):
        argv = ("--out", str(tmp_path / "x"), *args) if args[0] != "--out" else args
        proc = run_cli("report", *argv, db=store)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists()


# -- trust: noisy, insufficient, diverged and CI-less runs --------------------------------


def _trust_results() -> list[Any]:
    a_times = (0.2, 0.21, 0.2, 0.22, 0.2, 0.2)
    return [
        make_result("f32", times=a_times, suite="s1", avg_power_w=250.0),
        make_result("bf16", precision="amp_bf16", times=(0.1, 0.11, 0.1, 0.12, 0.1),
                    suite="s1", avg_power_w=260.0,
                    noise_reasons=("another process used 1.6 CPUs during the case",)),
        make_result("v32", workload="vgg16", times=a_times, suite="s1"),
        make_result("v16", workload="vgg16", precision="amp_fp16", times=(0.1, 0.12),
                    suite="s1"),
        make_result("l16", workload="lstm", precision="amp_fp16", times=(0.01, 0.01),
                    status="insufficient", sample_unit="sentence"),
        make_result("l32", workload="lstm", times=(0.5, 0.5, 0.5), status="diverged",
                    final_loss=float("nan"), sample_unit="sentence"),
        make_result("lok32", workload="lstm", times=(0.5, 0.52, 0.5), sample_unit="sentence",
                    finished="2025-12-01T00:00:00.000+00:00"),
        make_result("jax1", framework="jax", times=(0.15, 0.16, 0.15, 0.15), suite="s2",
                    started="2026-01-01T03:00:00.000+00:00",
                    finished="2026-01-01T03:00:00.000+00:00"),
    ]


def test_report_marks_noisy_and_keeps_invalid_runs_out_of_charts(tmp_path: Path) -> None:
    data = build_report(_trust_results(), store_url="sqlite:///trust.db")
    speedup = data.charts["speedup"]
    assert speedup is not None
    # Whiskers, greyed-out noisy ratio, CI-less ratio and left-out runs, all said.
    assert "Whiskers: 95% percentile bootstrap CI" in speedup.caption
    assert "Greyed out: 1 ratio(s) with a flagged input (a busy machine" in speedup.caption
    assert "1 ratio(s) have no CI" in speedup.caption
    assert "Left out: 2 insufficient or diverged run(s)" in speedup.caption
    # Which runs each bar comes from: suite s1 for the two speedups; the lstm amp_fp16
    # run is insufficient and the only lstm fp32 base diverged or is older: no lstm bar.
    bars = {src["bar"] for src in speedup.sources}
    assert any("resnet50" in b for b in bars) and any("vgg16" in b for b in bars)
    assert not any("lstm" in b for b in bars)
    assert {src["suite"] for src in speedup.sources} == {"s1"}
    # A record's reasons without verdict kinds (as 0.3 stored them) read as a busy machine.
    assert any(src["noisy"].startswith("busy machine: another process")
               for src in speedup.sources)
    # The framework ratio pairs jax (suite s2) with the torch run closest in time.
    assert data.frameworks and "closest in time" in data.frameworks[0]["source"]
    throughput = data.charts["throughput"]
    assert throughput is not None
    assert "1 flagged run(s): 1 measured on a busy machine" in throughput.caption
    assert "l16" not in {src["result"] for src in throughput.sources}
    assert "l32" not in {src["result"] for src in throughput.sources}
    assert any("flagged" in n and "busy machine" in n for n in data.notes)
    assert any("diverged or insufficient" in n for n in data.notes)
    files = write_report(data, tmp_path / "trust")
    html = files.html.read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert 'class="noisy"' in html and "another process used 1.6 CPUs" in text
    assert "st-insufficient" in html and "st-diverged" in html
    assert "no CI (n=2)" in text
    assert "Where each bar comes from" in text and "Greyed out" in text
    # No result has phases: no phase figure, no phase section.
    assert "phases_time" not in data.charts and 'id="phases"' not in html
    md = files.markdown.read_text()
    assert "ok (busy machine)" in md and "no CI (n=2)" in md and "Left out: 2" in md


def test_trust_report_opens_in_headless_chromium(tmp_path: Path) -> None:
    files = write_report(build_report(_trust_results()), tmp_path / "trust")
    page = inspect_page(files.html.as_uri())
    assert page["errors"] == [] and all(img["ok"] for img in page["images"])
    assert "busy machine" in page["text"] and "insufficient" in page["text"]


def test_results_table_fits_80_columns() -> None:
    from rich.console import Console

    from accelbench.render import results_table

    results = [
        make_result("r1", workload="inception_v3", precision="amp_bf16", batch=1024,
                    avg_power_w=65.0, energy_source="estimate", device="cpu",
                    times=(0.05, 0.051, 0.05, 0.052)),
        make_result("r2", workload="deepspeech2", status="insufficient", times=(0.3, 0.31),
                    device="cuda:10", noise_reasons=("load average 3.0 on 2 CPUs",)),
        make_result("r3", workload="transformer", status="diverged", times=(0.1,) * 3,
                    final_loss=float("nan")),
        make_result("r4", times=(0.001, 0.0011), avg_power_w=300.0),
        make_result("r5", size="small", precision="amp_fp16", status="timeout"),
        make_result("r6", workload="lstm", times=(0.0001,) * 4, avg_power_w=250.0,
                    noise_reasons=("gpu shared",)),
    ]
    # r4's reading with a 95% bound of 2.1%; the others were stored without one.
    r4 = results[3]
    results[3] = dataclasses.replace(r4, energy=tuple(
        dataclasses.replace(e, details={**e.details, "uncertainty": {"rel_95": 0.021}})
        for e in r4.energy))
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(results_table(results, title="suite quick-20260101T000000-abc123"))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "\u2026" not in text  # no key column cut into an ellipsis
    for word in ("inception_v3", "deepspeech2", "transformer", "insufficient", "diverged",
                 "timeout", "amp_bf16", "cuda:10", "(est.)", "!: busy machine",
                 "estimated, not measured"):
        assert word in text, word
    assert "640,000!" in text  # lstm: 64 / 0.1 ms, marked noisy
    # r1's estimated energy (65 W x 50 ms / 1024) with its unit; at 80 columns the CI
    # column is left out, said so, never squeezed.
    assert "3.22 mJ" in text
    assert "left out to fit the terminal: \u00b1CI*" in text
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(results_table(results))
    text = console.export_text()
    assert "no CI" in text and "\u00b1" in text and "left out" not in text
    # Wide: the details, the old keyword call still works.
    console = Console(width=250, record=True, file=io.StringIO())
    console.print(results_table(results, wide=True, title="t"))
    wide = console.export_text()
    assert "load average 3.0 on 2 CPUs" in wide and "no CI (n=2)" in wide
    assert "estimate" in wide and "r1" in wide
    # J/sample with its 95% bound, or that the record has none, as the legend explains.
    assert "+- 2.1%" in wide
    assert any("\u2502" in line and "error bound" in line for line in wide.splitlines())
    assert "error bound unavailable: recorded before bounds" in wide
    assert "J/sample +- y%: the energy's 95% error bound" in wide



def test_the_framework_comparison_takes_its_frameworks_from_the_results() -> None:
    from accelbench.report.html import render_html

    data = build_report(_trust_results(), store_url="sqlite:///trust.db")
    assert data.framework_base == "torch" and data.framework_others == ["jax"]
    page = render_html(data)
    assert "Frameworks: JAX relative to PyTorch" in page and "jax compile s" in page
    assert "throughput jax/torch" in page
    # Without the default framework in the data, the first present one is the base and
    # nothing is compared to a framework the results do not hold.
    only_jax = [r for r in _trust_results() if r.spec.framework == "jax"]
    data = build_report(only_jax, store_url="sqlite:///trust.db")
    assert data.framework_base == "jax" and data.framework_others == []
    assert data.frameworks == [] and data.charts["frameworks"] is None
    assert "two frameworks" in data.missing["frameworks"]
