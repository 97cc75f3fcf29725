"""Prometheus: live power of every sensor for ``accelbench power --prometheus HOST:PORT``,
and ``--pushgateway URL``: each finished case's throughput, CI and energy per sample.

Names follow Prometheus' conventions (base units in the name, ``_total`` on counters):
``accelbench_power_watts`` (gauge) and ``accelbench_energy_joules_total`` (counter since
the command started), labelled ``device``, ``sensor``, ``source`` (nvml, amdsmi, rapl,
estimate) and ``boundary`` (``device``: the accelerator; ``host``: CPU packages and
DRAM); a case pushes ``accelbench_throughput_samples_per_second`` with
``..._ci95_low``/``..._ci95_high``, ``accelbench_step_time_seconds`` and
``accelbench_energy_joules_per_sample``, grouped by suite and case key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from accelbench.errors import ConfigError
from accelbench.result import HOST_SCOPES, Result
from accelbench.store.base import display_url

PROMETHEUS_INSTALL = "pip install 'accelbench[prometheus]'"
CASE_LABELS = ("workload", "size", "batch_size", "precision", "device", "framework", "status")
SENSOR_LABELS = ("device", "sensor", "source", "boundary")


#: Where ``--prometheus :PORT`` serves: this machine only (name a host, e.g. ``0.0.0.0``,
#: to serve other machines).
DEFAULT_HOST = "127.0.0.1"

#: Addresses that mean every interface.
EVERY_INTERFACE = ("0.0.0.0", "::", "")


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:PORT`` for this machine only: :data:`DEFAULT_HOST`) as (host, port).

    Raises:
        ConfigError: not HOST:PORT with a port in 1..65535.
    """
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--prometheus must be HOST:PORT (e.g. 127.0.0.1:9400), got {text!r}")
    return host.strip("[]") or DEFAULT_HOST, int(port)


def boundary_of(scope: str) -> str:
    """A sensor's place: ``host`` (CPU packages, DRAM), ``node`` or ``device``."""
    return "host" if scope in HOST_SCOPES else "node" if scope == "node" else "device"


class PowerCollector:
    """Reads the live value of every sensor at each scrape (nothing is sampled for it)."""

    def __init__(self) -> None:
        self.meters: list[Any] = []
        self.lock = threading.Lock()

    def watch(self, meters: list[Any]) -> None:
        with self.lock:
            self.meters = list(meters)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        power = GaugeMetricFamily("accelbench_power_watts", "Latest power of the sensor, W",
                                  labels=SENSOR_LABELS)
        energy = CounterMetricFamily("accelbench_energy_joules", "Energy of the sensor since "
                                     "accelbench power started, J", labels=SENSOR_LABELS)
        with self.lock:
            meters = list(self.meters)
        for meter in meters:
            for sensor, value in meter.live().items():
                labels = [meter.device, sensor, meter.kind, boundary_of(meter.scope)]
                if value.power_w is not None:
                    power.add_metric(labels, value.power_w)
                energy.add_metric(labels, value.energy_j)
        yield power
        yield energy


def serving_line(host: str, port: int) -> str:
    """What ``power --prometheus`` says about where it serves: the URL and who can reach it."""
    shown = f"[{host}]" if ":" in host else host
    if host in EVERY_INTERFACE:
        who = ("on every interface: any machine that reaches this one can read it; "
               f"name {DEFAULT_HOST}:{port} for this machine only")
    elif host in (DEFAULT_HOST, "localhost", "::1"):
        who = f"this machine only; name a host, e.g. 0.0.0.0:{port}, to serve others"
    else:
        who = f"on the interface of {host}"
    return f"serving power at http://{shown}:{port}/metrics ({who})"


def serve_power(where: str) -> tuple[PowerCollector, Callable[[], None]]:
    """Serve ``/metrics`` at ``where`` (HOST:PORT; ``:PORT`` is this machine only) before
    any meter starts; returns the collector to hand the started meters to, and the
    function that stops serving.

    Raises:
        ConfigError: a bad HOST:PORT, the address cannot be bound, or no prometheus_client.
    """
    host, port = parse_host_port(where)
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise ConfigError("--prometheus needs the prometheus_client package, which is not "
                          f"installed: {PROMETHEUS_INSTALL}") from None
    registry = CollectorRegistry(auto_describe=False)
    collector = PowerCollector()
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"--prometheus {where}: cannot listen: {exc.strerror}") from None

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return collector, stop


class PushgatewaySink:
    """Pushes each case's figures to a Pushgateway, one group per (suite, case key, run)."""

    name = "--pushgateway"

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.shown = display_url(url)
        self.user, self.password = parts.username, parts.password
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        self.url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def close(self) -> None:
        pass

    def registry(self, result: Result) -> Any:
        """The figures of one case, as a registry of gauges."""
        from prometheus_client import CollectorRegistry, Gauge

        reg = CollectorRegistry()
        spec, st = result.spec, result.stats
        values = [spec.workload, spec.size, str(spec.batch_size), spec.precision, spec.device,
                  spec.framework, result.status]

        def gauge(name: str, doc: str, value: float | None, **extra: str) -> None:
            if value is None:
                return
            g = Gauge(name, doc, [*CASE_LABELS, *extra], registry=reg)
            g.labels(*values, *extra.values()).set(value)

        ci = st.samples_per_s_ci95 if st else None
        gauge("accelbench_throughput_samples_per_second", "Throughput at the median step "
              "time", st.samples_per_s if st else None, unit=result.sample_unit)
        gauge("accelbench_throughput_ci95_low_samples_per_second", "Lower end of the 95% CI "
              "(over the run's iterations)", ci[0] if ci else None, unit=result.sample_unit)
        gauge("accelbench_throughput_ci95_high_samples_per_second", "Upper end of the 95% CI "
              "(over the run's iterations)", ci[1] if ci else None, unit=result.sample_unit)
        gauge("accelbench_step_time_seconds", "Median step time", st.median_s if st else None)
        gauge("accelbench_energy_joules_per_sample", "Energy per sample inside the energy "
              "boundary", result.energy_j_per_sample, boundary=result.energy_boundary,
              source=result.energy_source)
        gauge("accelbench_noisy", "1 when something competed with the case",
              float(result.noisy))
        return reg

    def write(self, result: Result) -> None:
        from prometheus_client import push_to_gateway
        from prometheus_client.exposition import basic_auth_handler, default_handler

        user, password = self.user, self.password

        def handler(url: str, method: str, timeout: float | None, headers: Any,
                    data: bytes) -> Callable[[], None]:
            if user is not None:
                return basic_auth_handler(url, method, timeout, headers, data, user,
                                          password or "")
            return default_handler(url, method, timeout, headers, data)

        group = {"suite_id": result.suite_id or "none", "case_key": result.spec.case_key(),
                 "result_id": result.id}
        try:
            push_to_gateway(self.url, job="accelbench", registry=self.registry(result),
                            grouping_key=group, timeout=10, handler=handler)
        except Exception as exc:  # the URL may hold a password: never in the message
            why = str(exc).replace(self.password, "***") if self.password else str(exc)
            raise RuntimeError(f"push to {self.shown} failed: {why}") from None
