"""The categories a step's wall time is split into (the steps table's ``<category>_ms`` columns and the
``step_<category>_pct`` metrics), in display order: one list for the analyses that fill them and the
reports that show them. Imports nothing, so a report can name them without loading the analyses."""

from __future__ import annotations

STEP_CATEGORIES = ("device_compute", "input", "host_compute", "kernel_launch", "collective", "between_steps",
                   "idle", "other")

__all__ = ["STEP_CATEGORIES"]
