"""A third node meter registered through ``register_meter``: a "PDU" whose outlet power is
read from the file named in $ACCELBENCH_TEST_PDU_FILE (what a PDU's HTTP API would answer)."""

from __future__ import annotations

import os

from accelbench.errors import MeterError
from accelbench.meters.common import SensorInfo
from accelbench.meters.external import NodeMeter
from accelbench.meters.registry import register_meter
from accelbench.spec import MeterOptions


class FilePduMeter(NodeMeter):
    kind = "test_pdu"
    sensor = "test-pdu"

    def read_node_power_w(self) -> float:
        path = os.environ.get("ACCELBENCH_TEST_PDU_FILE", "")
        try:
            with open(path, encoding="ascii") as f:
                return float(f.read())
        except (OSError, ValueError) as exc:
            raise MeterError(f"PDU outlet unreadable: {exc}") from exc

    def describe(self) -> list[SensorInfo]:
        return [SensorInfo("test PDU outlet", "test-pdu", "node", True, "")]


def make_pdu(options: MeterOptions) -> FilePduMeter:
    return FilePduMeter(interval_s=options.node_meter_interval_s)


register_meter("test_pdu", make_pdu, boundary="node")
