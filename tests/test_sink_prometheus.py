"""Prometheus: ``power --prometheus`` scraped live and parsed by prometheus_client's own
parser; ``--pushgateway`` against a stand-in Pushgateway that records what it receives."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from accelbench.sinks import SinkOptions, open_sinks
from accelbench.store import open_store
from tests.conftest import cli_env, run_cli
from tests.sink_fakes import POWER_W, powercap_tree, pushgateway
from tests.test_compare import make_result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _group(path: str) -> dict[str, str]:
    """A Pushgateway path's grouping key: /metrics/job/J/k1/v1/k2/v2 ..."""
    parts = path.strip("/").split("/")
    assert parts[0] == "metrics"
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _scrape(url: str) -> dict[str, list]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_power_serves_live_gauges_and_energy_counters(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with powercap_tree(tmp_path) as root:
        proc = subprocess.Popen(
            [sys.executable, "-m", "accelbench.cli", "power", "--interval-ms", "100",
             "--duration", "60", "--prometheus", f"127.0.0.1:{port}"],
            env=cli_env(ACCELBENCH_POWERCAP_ROOT=str(root)), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        try:
            first: dict[str, list] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    first = _scrape(url)
                except OSError:
                    first = {}
                if first.get("accelbench_power_watts"):
                    break
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
            time.sleep(1.0)
            second = _scrape(url)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    [power] = [s for s in second["accelbench_power_watts"] if s.labels["sensor"] == "package-0"]
    assert power.labels == {"device": "cpu", "sensor": "package-0", "source": "rapl",
                            "boundary": "host"}
    assert power.value == pytest.approx(POWER_W, rel=0.25)
    # A counter: the family is accelbench_energy_joules, its sample ..._total, growing.
    e1 = [s for s in first["accelbench_energy_joules"] if s.name.endswith("_total")]
    e2 = [s for s in second["accelbench_energy_joules"] if s.name.endswith("_total")]
    assert [s.name for s in e2] == ["accelbench_energy_joules_total"]
    assert e2[0].labels == power.labels
    assert e2[0].value - e1[0].value == pytest.approx(POWER_W * 1.0, rel=0.5)


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} has them) that listen on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.append(addr)
    return found


def test_a_bare_port_serves_this_machine_only_and_says_where(tmp_path: Path) -> None:
    """Issue 47: ``--prometheus :PORT`` served on every interface without a word; now it
    binds to 127.0.0.1 and its first line says where it serves and who can reach it."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp to see what listens")
    port = _free_port()
    with powercap_tree(tmp_path) as root:
        proc = subprocess.Popen(
            [sys.executable, "-m", "accelbench.cli", "power", "--interval-ms", "200",
             "--duration", "60", "--prometheus", f":{port}", "-q"],
            env=cli_env(ACCELBENCH_POWERCAP_ROOT=str(root)), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline().strip()  # said once bound, before any reading
            listening = _listening(port)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert line == (f"serving power at http://127.0.0.1:{port}/metrics (this machine only; "
                    f"name a host, e.g. 0.0.0.0:{port}, to serve others)")
    assert listening == ["0100007F"]  # 127.0.0.1, not 00000000 (every interface)


def test_a_bad_prometheus_address_is_one_line(tmp_path: Path) -> None:
    p = run_cli("power", "--duration", "1", "--prometheus", "localhost")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "accelbench: error: --prometheus must be HOST:PORT (e.g. 127.0.0.1:9400), got "
        "'localhost'"]


def test_a_case_is_pushed_with_throughput_ci_and_energy(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with pushgateway() as gw:
        p = run_cli("run", "lstm", "--size", "tiny", "--threads", "1", "--max-time", "0.5",
                    "--no-energy", "--pushgateway", gw.url, db=db)
        assert p.returncode == 0, p.stderr
        [(method, path, body)] = gw.received
    with open_store(str(db)) as st:
        [r] = st.query()
    assert method == "PUT"
    assert _group(path) == {"job": "accelbench", "suite_id": "none",
                            "case_key": r.spec.case_key(), "result_id": r.id}
    fams = {f.name: f.samples for f in text_string_to_metric_families(body)}
    [tput] = fams["accelbench_throughput_samples_per_second"]
    assert r.stats is not None and r.stats.samples_per_s_ci95 is not None
    assert tput.value == pytest.approx(r.stats.samples_per_s)
    assert tput.labels["workload"] == "lstm" and tput.labels["status"] == "ok"
    [low] = fams["accelbench_throughput_ci95_low_samples_per_second"]
    [high] = fams["accelbench_throughput_ci95_high_samples_per_second"]
    assert (low.value, high.value) == pytest.approx(r.stats.samples_per_s_ci95)
    assert "accelbench_energy_joules_per_sample" not in fams  # --no-energy: no figure


def test_energy_per_sample_is_pushed_with_its_boundary() -> None:
    with pushgateway() as gw:
        with open_sinks(SinkOptions(pushgateway=gw.url + "/")) as sinks:
            sinks.emit(make_result("gpu1", avg_power_w=250.0, suite="paper-1"))
        [(_m, path, body)] = gw.received
    assert _group(path)["suite_id"] == "paper-1"
    fams = {f.name: f.samples for f in text_string_to_metric_families(body)}
    [energy] = fams["accelbench_energy_joules_per_sample"]
    assert energy.labels["boundary"] == "device"
    assert energy.labels["source"] == "integrated_samples"
    assert energy.value == pytest.approx(make_result("gpu1", avg_power_w=250.0)
                                         .energy_j_per_sample)


def test_a_password_in_the_url_is_sent_as_basic_auth() -> None:
    import base64

    with pushgateway() as gw:
        url = gw.url.replace("http://", "http://bob:s3cret@")
        with open_sinks(SinkOptions(pushgateway=url)) as sinks:
            sinks.emit(make_result("gpu1", avg_power_w=250.0))
        assert gw.auth == ["Basic " + base64.b64encode(b"bob:s3cret").decode()]
        assert len(gw.received) == 1


def test_a_failed_push_warns_without_the_password(recwarn: pytest.WarningsRecorder) -> None:
    port = _free_port()  # nothing listens there
    with open_sinks(SinkOptions(pushgateway=f"http://bob:s3cret@127.0.0.1:{port}")) as sinks:
        sinks.emit(make_result("gpu1", avg_power_w=250.0))
    [w] = [w for w in recwarn.list if "--pushgateway" in str(w.message)]
    text = str(w.message)
    assert "bob:***@127.0.0.1" in text and "s3cret" not in text
