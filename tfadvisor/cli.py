"""The ``tfadvisor`` command line (typer).

Bad input is one line on stderr naming the file and the problem, and exit code 2.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path

import typer

from tfadvisor.errors import TraceError

app = typer.Typer(
    help="Read TensorFlow Profiler traces and say why training is slow, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
rules_app = typer.Typer(help="List the rules, or explain one.", invoke_without_command=True)
app.add_typer(rules_app, name="rules")


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    warning = "warning"
    critical = "critical"


def fail(message: str, code: int = 2) -> None:
    """Print one line to stderr and exit."""
    typer.echo(f"tfadvisor: {message}", err=True)
    raise typer.Exit(code)


def _options(params: int | None, bandwidth: str | None, replicas: int | None, batch_size: int | None):
    from tfadvisor.analyses import Options

    opts = Options(param_count=params, replicas=replicas, batch_size=batch_size)
    if bandwidth:
        from tfadvisor.links import bandwidth_gbps

        try:
            opts.bandwidth_gbps = bandwidth_gbps(bandwidth)
        except ValueError as err:
            fail(f"--bandwidth: {err}")
        opts.link = bandwidth
    return opts


def _progress(paths: list[str], quiet: bool):
    """A rich progress bar for big traces on a terminal; None otherwise."""
    if quiet or not sys.stderr.isatty():
        return None, None
    total = 0
    for p in paths:
        pp = Path(p)
        if pp.is_file():
            total += pp.stat().st_size
        elif pp.is_dir():
            total += sum(f.stat().st_size for f in pp.rglob("*.xplane.pb"))
    if total < 50 * 1024 * 1024:
        return None, None
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn(), transient=True, console=_stderr_console())
    task = bar.add_task("loading trace", total=total)

    def update(done: int, all_bytes: int) -> None:
        bar.update(task, completed=done, total=all_bytes or total)

    return bar, update


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


@app.command()
def analyze(
    paths: list[str] = typer.Argument(..., help="A logdir, a run directory, or .xplane.pb file(s)."),
    run: str | None = typer.Option(None, "--run", help="Run to analyse (default: the newest)."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    html: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML report here."),
    rules: list[str] = typer.Option([], "--rules", help="Extra rules directory (repeatable)."),
    params: int | None = typer.Option(None, "--params", help="Model parameter count (AllReduce check)."),
    bandwidth: str | None = typer.Option(None, "--bandwidth", help="Link bandwidth in GB/s, or a link name."),
    replicas: int | None = typer.Option(None, "--replicas", help="Number of replicas (data-parallel workers)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Global batch size."),
    data: str | None = typer.Option(None, "--data", help="Training data files to check (dir or glob, gs:// ok)."),
    fail_on: FailOn | None = typer.Option(None, "--fail-on", help="Exit 1 when a finding this severe exists."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes for multi-host runs."),
    dask: str | None = typer.Option(None, "--dask", help="Dask scheduler address for multi-host parsing."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
) -> None:
    """Analyse a profile: summary, then findings, most important first."""
    from tfadvisor.api import analyze as run_analysis

    opts = _options(params, bandwidth, replicas, batch_size)
    bar, update = _progress(paths, quiet)
    target = paths if len(paths) > 1 else paths[0]
    if bar is not None:
        with bar:
            result = run_analysis(target, run=run, options=opts, rules_dirs=rules, progress=update, jobs=jobs,
                                  dask=dask, data=data)
    else:
        result = run_analysis(target, run=run, options=opts, rules_dirs=rules, jobs=jobs, dask=dask, data=data)
    if html is not None:
        from tfadvisor.report.html import write_html

        write_html(result, html)
        if not quiet:
            typer.echo(f"wrote {html}", err=True)
    if fmt is Format.json:
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    elif fmt is Format.markdown:
        from tfadvisor.report.markdown import render_markdown

        typer.echo(render_markdown(result))
    else:
        from tfadvisor.report.terminal import print_result

        print_result(result)
    if fail_on is not None:
        from tfadvisor.advice import severity_at_least

        if any(severity_at_least(f.severity, fail_on.value) for f in result.findings):
            raise typer.Exit(1)


@app.command()
def runs(logdir: str = typer.Argument(..., help="A TensorBoard logdir.")) -> None:
    """List the profile runs under a logdir (newest last) and their hosts."""
    from tfadvisor.discovery import find_runs

    for r in find_runs(logdir):
        typer.echo(f"{r.label()}\t{len(r.files)} host(s): {', '.join(r.hosts)}")


@rules_app.callback()
def rules_list(
    ctx: typer.Context,
    rules: list[str] = typer.Option([], "--rules", help="Extra rules directory (repeatable)."),
) -> None:
    """List every rule (id, severity, title)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = rules
        return
    from tfadvisor.advice import list_rules_text, load_rules

    typer.echo(list_rules_text(load_rules(extra_dirs=rules)))


@rules_app.command("explain")
def rules_explain(
    ctx: typer.Context,
    rule_id: str = typer.Argument(..., help="Rule id, e.g. input_bound."),
) -> None:
    """Print one rule in full: what it checks, why it matters, example, fix."""
    from tfadvisor.advice import explain_rule, load_rules

    rules = load_rules(extra_dirs=ctx.obj or [])
    text = explain_rule(rules, rule_id)
    if text is None:
        fail(f"no rule {rule_id!r}; `tfadvisor rules` lists them")
    typer.echo(text)


def _register_optional() -> None:
    """Commands that live in their own modules (none of them imports TensorFlow at import time)."""
    from tfadvisor.capture.cli import app as capture_app
    from tfadvisor.diff import diff_command
    from tfadvisor.multihost import scaling_command

    app.add_typer(capture_app, name="capture")
    app.command("diff")(diff_command)
    app.command("scaling")(scaling_command)


def main() -> None:
    """Entry point: run the app, turning bad input into one line and exit code 2."""
    _register_optional()
    try:
        app()  # standalone: usage errors print usage and exit 2
    except TraceError as err:
        typer.echo(f"tfadvisor: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        if os.environ.get("TFADVISOR_DEBUG"):
            raise
        typer.echo(f"tfadvisor: internal error: {type(err).__name__}: {err} (set TFADVISOR_DEBUG=1 for details)",
                   err=True)
        sys.exit(1)

if __name__ == "__main__":
    main()
