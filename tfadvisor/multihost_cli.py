"""The ``tfadvisor scaling`` command: its signature, kept apart from :mod:`tfadvisor.scaling` (the
analysis) and :mod:`tfadvisor.report.scaling` (the table) so that the command line can list it without
importing numpy, pandas and the analyses."""

from __future__ import annotations

from enum import Enum

import typer


class ScalingFormat(str, Enum):
    text = "text"
    json = "json"


def scaling_command(
    runs: list[str] = typer.Argument(..., metavar="RUN",
                                     help="Two or more runs (logdirs, run directories) of the same model at "
                                          "different replica counts."),
    replicas: str | None = typer.Option(None, "--replicas", metavar="N[,N...]",
                                        help="Replica count of each run, e.g. 2,4,8 "
                                             "(default: each run's tfadvisor_run.json)."),
    batch_size: str | None = typer.Option(None, "--batch-size", metavar="N[,N...]",
                                          help="Global batch size: one value, or one per "
                                               "run (default: tfadvisor_run.json)."),
    fmt: ScalingFormat = typer.Option(ScalingFormat.text, "--format", "-f", help="Output format."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", metavar="N", help="Worker processes for multi-host runs."),
    dask: str | None = typer.Option(None, "--dask", metavar="ADDRESS",
                                    help="Dask scheduler address for multi-host parsing."),
) -> None:
    """Scaling efficiency across runs at different replica counts: throughput per replica, and where
    the efficiency is lost (AllReduce, input, other)."""
    import json

    from tfadvisor.report.scaling import render_scaling
    from tfadvisor.scaling import scaling_report

    report = scaling_report(runs, replicas, batch_size, jobs=jobs, dask=dask)
    if fmt is ScalingFormat.json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        render_scaling(report)
