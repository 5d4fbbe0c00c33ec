"""The ``tfadvisor scaling`` command: its signature, kept apart from :mod:`tfadvisor.multihost.scaling` (the
analysis) and :mod:`tfadvisor.report.scaling` (the table) so that the command line can list it without
importing numpy, pandas and the analyses."""

from __future__ import annotations

from typing import Annotated

import typer

from tfadvisor.cli.common import Command, choice, one_of


def scaling_command(
    runs: Annotated[list[str], typer.Argument(metavar="RUN", show_default=False, help="Two or more runs (logdirs, run "
                                              "directories) of the same model at different replica counts.")],
    replicas: Annotated[str | None, typer.Option(metavar="N[,N...]", help="Replica count of each run, e.g. 2,4,8 "
                                                 "(default: each run's tfadvisor_run.json).")] = None,
    batch_size: Annotated[str | None, typer.Option(metavar="N[,N...]", help="Global batch size: one value, or one per "
                                                   "run (default: tfadvisor_run.json).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", parser=one_of("format", ("text", "json")),
                                     metavar=choice("text", "json"), help="Output format.")] = "text",
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", metavar="N",
                                             help="Worker processes for multi-host runs.")] = None,
    dask: Annotated[str | None, typer.Option(metavar="ADDRESS",
                                             help="Dask scheduler address for multi-host parsing.")] = None,
) -> None:
    """Scaling efficiency across runs at different replica counts: throughput per replica, and where
    the efficiency is lost (AllReduce, input, other)."""
    import json

    from tfadvisor.multihost.scaling import scaling_report
    from tfadvisor.report.scaling import render_scaling

    report = scaling_report(list(runs), replicas, batch_size, jobs=jobs, dask=dask)
    if fmt == "json":
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        render_scaling(report)


def register(app: typer.Typer) -> None:
    """Add ``scaling`` to the root command."""
    app.command("scaling", cls=Command, short_help="Scaling efficiency across runs at different replica counts.")(
        scaling_command)
