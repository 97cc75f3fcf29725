"""Stand-ins at the vendor boundary for the sink tests: a powercap tree whose package
counter advances at a known power (a sampled sensor on a machine without one), a
Pushgateway on localhost that records what it receives, and a package shadowed by one
that cannot be imported (a missing extra)."""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POWER_W = 40.0


class PowercapWriter(threading.Thread):
    """Advances ``energy_uj`` of one package zone at ``power_w``, atomically, every ms."""

    def __init__(self, zone: Path, power_w: float = POWER_W) -> None:
        super().__init__(daemon=True)
        self.zone, self.power_w = zone, power_w
        self.halt = threading.Event()
        self.energy_uj = 0.0

    def run(self) -> None:
        last = time.monotonic()
        while not self.halt.is_set():
            now = time.monotonic()
            self.energy_uj += self.power_w * (now - last) * 1e6
            last = now
            tmp = self.zone / "energy_uj.tmp"
            tmp.write_text(f"{int(self.energy_uj)}\n")
            os.replace(tmp, self.zone / "energy_uj")
            time.sleep(0.001)


def zone_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A powercap root with one package zone at 0 J: (root, zone)."""
    root = tmp_path / "powercap"
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return root, zone


@contextmanager
def powercap_tree(tmp_path: Path, power_w: float = POWER_W) -> Iterator[Path]:
    """A powercap root (``ACCELBENCH_POWERCAP_ROOT``) with one package zone drawing
    ``power_w`` while the block runs."""
    root, zone = zone_tree(tmp_path)
    writer = PowercapWriter(zone, power_w)
    writer.start()
    try:
        yield root
    finally:
        writer.halt.set()
        writer.join()


class Pushgateway(http.server.ThreadingHTTPServer):
    """Records every request: (method, path, body text)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, str]] = []
        self.auth: list[str | None] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        assert isinstance(self.server, Pushgateway)
        self.server.received.append((self.command, self.path, body))
        self.server.auth.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = do_DELETE = _record  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def pushgateway() -> Iterator[Pushgateway]:
    server = Pushgateway()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def shadow_package(tmp_path: Path, name: str) -> str:
    """A PYTHONPATH under which ``import name`` fails as if it were not installed."""
    pkg = tmp_path / "shadow" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"raise ImportError({f'No module named {name}'!r})\n")
    return os.pathsep.join(p for p in (str(tmp_path / "shadow"),
                                       os.environ.get("PYTHONPATH", "")) if p)
