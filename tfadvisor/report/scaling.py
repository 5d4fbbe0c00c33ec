"""The scaling report (:func:`tfadvisor.multihost.scaling.scaling_report`) as a rich table, for ``tfadvisor
scaling``."""

from __future__ import annotations

from typing import Any


def render_scaling(report: dict[str, Any], console=None) -> None:
    """The scaling report as a rich table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"Scaling (baseline: {report['baseline']}, {report['baseline_replicas']} replicas)")
    for col, just in [("run", "left"), ("replicas", "right"), ("global batch", "right"), ("step ms", "right"),
                      ("examples/s", "right"), ("per replica", "right"), ("efficiency", "right"),
                      ("lost: AllReduce", "right"), ("input", "right"), ("other", "right")]:
        table.add_column(col, justify=just)
    for r in report["runs"]:
        lp = r["loss_pct"]
        table.add_row(
            r["run"], str(r["replicas"]), str(r["global_batch"]), f"{r['step_time_ms']:.1f}",
            f"{r['examples_per_s']:,.1f}", f"{r['examples_per_s_per_replica']:,.1f}",
            f"{r['scaling_efficiency_pct']:.1f} %",
            *(("-", "-", "-") if r["baseline"] else
              (f"{lp['allreduce']:+.1f} pts", f"{lp['input']:+.1f} pts", f"{lp['other']:+.1f} pts")),
        )
    console.print(table)
    console.print("efficiency = throughput_N / (N/N0 x throughput_N0); 'lost' splits 100 - efficiency into the "
                  "growth of AllReduce, input and other time per step over the baseline's (same per-replica batch).",
                  highlight=False)


__all__ = ["render_scaling"]
