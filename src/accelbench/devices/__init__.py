"""Device discovery and the machine description stored with every record."""

from accelbench.devices.discovery import cpu_info, gpu_info, machine_info, software_info

__all__ = ["cpu_info", "gpu_info", "machine_info", "software_info"]
