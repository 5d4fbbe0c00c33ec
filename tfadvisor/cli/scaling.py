"""The ``tfadvisor scaling`` command: its signature, kept apart from :mod:`tfadvisor.multihost.scaling` (the
analysis) and :mod:`tfadvisor.report.scaling` (the table) so that the command line can list it without
importing numpy, pandas and the analyses."""

from __future__ import annotations

import click

from tfadvisor.errors import Argument, Command


@click.command("scaling", cls=Command, short_help="Scaling efficiency across runs at different replica counts.")
@click.argument("runs", cls=Argument, nargs=-1, required=True, metavar="RUN",
                help="Two or more runs (logdirs, run directories) of the same model at different replica counts.")
@click.option("--replicas", metavar="N[,N...]",
              help="Replica count of each run, e.g. 2,4,8 (default: each run's tfadvisor_run.json).")
@click.option("--batch-size", metavar="N[,N...]",
              help="Global batch size: one value, or one per run (default: tfadvisor_run.json).")
@click.option("--format", "-f", "fmt", type=click.Choice(("text", "json")), default="text", help="Output format.")
@click.option("--jobs", "-j", type=int, metavar="N", help="Worker processes for multi-host runs.")
@click.option("--dask", metavar="ADDRESS", help="Dask scheduler address for multi-host parsing.")
def scaling_command(runs: tuple[str, ...], replicas: str | None, batch_size: str | None, fmt: str,
                    jobs: int | None, dask: str | None) -> None:
    """Scaling efficiency across runs at different replica counts: throughput per replica, and where
    the efficiency is lost (AllReduce, input, other)."""
    import json

    from tfadvisor.multihost.scaling import scaling_report
    from tfadvisor.report.scaling import render_scaling

    report = scaling_report(list(runs), replicas, batch_size, jobs=jobs, dask=dask)
    if fmt == "json":
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        render_scaling(report)
