"""The ``tfadvisor`` command line (typer): ``app``, its commands, and ``main``, the console script.

Bad input is one line on stderr naming the file and the problem, and exit code 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from tfadvisor.cli.common import Command, choice, one_of, parse_count, typer_app
from tfadvisor.errors import TraceError, fail
from tfadvisor.model.interconnects import LINKS

LINK_NAMES = tuple(LINKS)

__all__ = ["app", "main", "parse_count"]

app = typer_app(help="Read TensorFlow Profiler traces and say why training is slow, and what to change.",
                no_args_is_help=True)

FORMATS = ("text", "json", "markdown")
FAIL_ON = ("warning", "critical")
TEXT_OR_JSON = ("text", "json")
FORMAT_HELP = "Output format: text, or json (tfadvisor schema KIND prints its JSON Schema)."
RULES_HELP = "Extra rules directory (repeatable)."

# The options several commands share, as Annotated types.
Rules = Annotated[list[str] | None, typer.Option("--rules", metavar="DIR", help=RULES_HELP, show_default=False)]
TextOrJson = Annotated[str, typer.Option("--format", "-f", parser=one_of("format", TEXT_OR_JSON),
                                         metavar=choice(*TEXT_OR_JSON), help=FORMAT_HELP)]
Replicas = Annotated[int | None, typer.Option(parser=parse_count, metavar="N",
                                              help="Number of replicas (data-parallel workers).")]
BatchSize = Annotated[int | None, typer.Option(parser=parse_count, metavar="N", help="Global batch size.")]
Jobs = Annotated[int | None, typer.Option("--jobs", "-j", metavar="N", help="Worker processes for multi-host runs.")]
Dask = Annotated[str | None, typer.Option(metavar="ADDRESS", help="Dask scheduler address for multi-host parsing.")]


def _options(params: int | None, bandwidth: str | None, replicas: int | None, batch_size: int | None):
    from tfadvisor.analyses import Options

    opts = Options(param_count=params, replicas=replicas, batch_size=batch_size)
    if bandwidth:
        from tfadvisor.model.interconnects import bandwidth_gbps

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


@app.command(cls=Command, short_help="Analyse a profile: summary, then findings, most important first.")
def analyze(
    ctx: typer.Context,
    paths: Annotated[list[str], typer.Argument(metavar="PATH", show_default=False,
                                               help="A logdir, a run directory, or .xplane.pb file(s).")],
    run: Annotated[str | None, typer.Option(metavar="NAME", help="Run to analyse (default: the newest): its name, its "
                                            "path under the logdir, or a prefix that matches one run only.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", parser=one_of("format", FORMATS), metavar=choice(*FORMATS),
                                     help="Output format.")] = "text",
    html: Annotated[Path | None, typer.Option(metavar="FILE", help="Also write a self-contained HTML report here "
                                              "(alone: one line naming it instead of the terminal report).")] = None,
    rules: Rules = None,
    params: Annotated[int | None, typer.Option(parser=parse_count, metavar="N", help="Model parameter count "
                                               "(AllReduce check): 25000000, 25e6 or 25M.")] = None,
    bandwidth: Annotated[str | None, typer.Option(metavar="GBPS|LINK", help="Link bandwidth in GB/s, or a link name: "
                                                  + ", ".join(LINK_NAMES) + ".")] = None,
    replicas: Replicas = None,
    batch_size: BatchSize = None,
    data: Annotated[str | None, typer.Option(metavar="PATH", help="Training data files to check (dir or glob, gs:// "
                                             "ok).")] = None,
    fail_on: Annotated[str | None, typer.Option(parser=one_of("fail-on", FAIL_ON), metavar=choice(*FAIL_ON),
                                                help="Exit 1 when a finding this severe exists.")] = None,
    jobs: Jobs = None,
    dask: Dask = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    tables: Annotated[bool, typer.Option("--tables", help="With --format json: add the tables (steps, gaps, ...) as "
                                         "a \"tables\" key, one object per row.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Text format: every finding's evidence and fix and every note, "
                                       "also for a run of more than 16 hosts (shown at a glance by default).")] = False,
    all_notes: Annotated[bool, typer.Option("--notes", help="Text format: list every note on what the trace could not "
                                            "tell (by default only those that change what a finding means; the "
                                            "others are counted).")] = False,
) -> None:
    """Analyse a profile: summary, then findings, most important first."""
    from tfadvisor.api import analyze as run_analysis

    if tables and fmt != "json":
        fail(f"--tables needs --format json (the {fmt} report has no tables)")
    rules_list = list(rules or [])
    opts = _options(params, bandwidth, replicas, batch_size)
    bar, update = _progress(paths, quiet)
    target = paths if len(paths) > 1 else paths[0]
    if bar is not None:
        with bar:
            result = run_analysis(target, run=run, options=opts, rules_dirs=rules_list, progress=update, jobs=jobs,
                                  dask=dask, data=data)
    else:
        result = run_analysis(target, run=run, options=opts, rules_dirs=rules_list, jobs=jobs, dask=dask, data=data)
    if html is not None:
        from tfadvisor.report.html import write_html

        try:
            write_html(result, html)
        except OSError as err:  # a parent that is a file, no permission, a full disk: bad input, not a crash
            fail(f"{html}: cannot write the HTML report ({err.strerror or type(err).__name__})")
    source = ctx.get_parameter_source("fmt")
    _print_report(result, fmt, html, tables=tables, full=full, notes=all_notes, quiet=quiet,
                  explicit_format=source is not None and source.name != "DEFAULT")
    if fail_on is not None:
        from tfadvisor.advice import severity_at_least

        if any(severity_at_least(f.severity, fail_on) for f in result.findings):
            raise typer.Exit(1)


def _print_report(result, fmt: str, html: Path | None, *, tables: bool, full: bool, notes: bool, quiet: bool,
                  explicit_format: bool) -> None:
    """The report on stdout; with ``--html FILE`` and no ``--format``, one line naming the file instead."""
    if html is not None and not explicit_format:  # the report is the file: say where it is, nothing more
        n = len(result.findings)
        typer.echo(f"wrote {html} ({n} finding{'s' if n != 1 else ''}): open it in a browser")
        return
    if html is not None and not quiet:
        typer.echo(f"wrote {html}", err=True)
    if fmt == "json":
        out = result.to_dict()
        if tables:
            from tfadvisor.report.json_report import tables_to_dict

            out["tables"] = tables_to_dict(result.tables)
        typer.echo(json.dumps(out, indent=2, default=str))
    elif fmt == "markdown":
        from tfadvisor.report.markdown import render_markdown

        typer.echo(render_markdown(result))
    else:
        from tfadvisor.report.terminal import print_result

        print_result(result, full=full, notes=notes)


@app.command(cls=Command, short_help="Write the trace and tfadvisor's findings as a Perfetto JSON trace.")
def export(
    path: Annotated[str, typer.Argument(metavar="PATH", show_default=False,
                                        help="A logdir, a run directory, or an .xplane.pb file.")],
    out: Annotated[Path, typer.Argument(metavar="OUT.json", show_default=False,
                                        help="The JSON trace to write (open it in ui.perfetto.dev).")],
    run: Annotated[str | None, typer.Option(metavar="NAME", help="Run to export (default: the newest).")] = None,
    max_events: Annotated[str, typer.Option(metavar="N", help="Most trace events to write (e.g. 200K, 1M; 0 for all): "
                                            "beyond it the longest are kept, and every event a finding is about.")]
    = "1M",
    rules: Rules = None,
    params: Annotated[int | None, typer.Option(parser=parse_count, metavar="N", help="Model parameter count "
                                               "(AllReduce check), as for analyze.")] = None,
    bandwidth: Annotated[str | None, typer.Option(metavar="GBPS|LINK", help="Link bandwidth in GB/s, or a link name, "
                                                  "as for analyze.")] = None,
    replicas: Replicas = None,
    batch_size: BatchSize = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line on stderr.")] = False,
) -> None:
    """Write the trace with tfadvisor's steps, gaps and findings as a Chrome/Perfetto JSON trace.

    The findings are those `tfadvisor analyze` reports for the same options (a multi-host run's run-level ones
    included); the slices they are about carry the rule ids."""
    from tfadvisor.api import analyze as run_analysis
    from tfadvisor.io.discovery import resolve
    from tfadvisor.io.reader import load_run
    from tfadvisor.report.perfetto import host_parts, write_export

    limit = None if max_events.strip() in ("0", "all") else _count_option(max_events, "--max-events")
    opts = _options(params, bandwidth, replicas, batch_size)
    chosen = resolve(path, run=run)
    if _inside(out, chosen.directory):
        fail(f"{out}: will not write into the profile directory it reads ({chosen.directory})")
    trace = load_run(chosen)
    # the same analysis as `tfadvisor analyze` (a one-host run reuses the trace loaded here)
    result = run_analysis(chosen, options=opts, rules_dirs=list(rules or []),
                          trace=trace if len(chosen.files) == 1 else None)
    hosts, run_findings = host_parts(result)
    try:
        counts = write_export(out, trace, hosts, max_events=limit, run_findings=run_findings)
    except OSError as err:
        fail(f"{out}: cannot write: {err.strerror or err}")
    if not quiet:
        left = f", {counts['dropped']:,} shorter ones left out (--max-events)" if counts["dropped"] else ""
        n_findings = len(result.findings)
        typer.echo(f"wrote {out}: {counts['written']:,} trace events{left}, {counts['tracks']:,} tfadvisor slices "
                   f"(steps, gaps, {n_findings} finding{'s' if n_findings != 1 else ''}); marked with a finding's "
                   f"rule: {counts['annotated']:,} trace events, {counts['marked_steps']:,} steps, "
                   f"{counts['marked_gaps']:,} gaps", err=True)


def _count_option(text: str, name: str) -> int:
    try:
        return parse_count(text)
    except typer.BadParameter as err:
        fail(f"{name}: {err}")


def _inside(path: Path, directory: str) -> bool:
    try:
        return bool(directory) and Path(path).resolve().is_relative_to(Path(directory).resolve())
    except OSError:
        return False


@app.command(cls=Command, short_help="List the profile runs under a logdir and their hosts.")
def runs(
    logdir: Annotated[str, typer.Argument(metavar="LOGDIR", show_default=False, help="A TensorBoard logdir.")],
    fmt: TextOrJson = "text",
) -> None:
    """List the profile runs under a logdir (newest last) and their hosts."""
    from tfadvisor.io.discovery import find_runs

    found = find_runs(logdir)
    if fmt == "json":
        from tfadvisor.report.json_report import runs_to_dict

        typer.echo(json.dumps(runs_to_dict(logdir, found), indent=2))
        return
    for r in found:
        typer.echo(f"{r.label()}\t{len(r.files)} host(s): {', '.join(r.hosts)}")


@app.command(cls=Command, short_help="Print the JSON Schema of a --format json output.")
def schema(
    kind: Annotated[str, typer.Argument(metavar="[analyze|diff|scaling|rules|runs]",
                                        help="Which output: analyze, diff, scaling, rules or runs.")] = "analyze",
) -> None:
    """Print the JSON Schema (draft 2020-12) of one --format json output; the versioning policy is in README."""
    from tfadvisor.report.schema import KINDS, shipped

    if kind not in KINDS:
        fail(f"no schema {kind!r}: one of {', '.join(KINDS)}")
    typer.echo(shipped(kind), nl=False)


@app.command("mcp", cls=Command, short_help="Serve tfadvisor's tools to coding agents over MCP (stdio).")
def mcp_command() -> None:
    """Run an MCP server on stdin/stdout with tools that mirror this command line (list runs, analyze, diff,
    explain a rule, export a timeline, get a JSON Schema). Needs pip install 'tfadvisor[mcp]'."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        fail("tfadvisor mcp needs the MCP SDK: pip install 'tfadvisor[mcp]'")
    from tfadvisor.cli.mcp_server import serve

    serve()


rules_app = typer_app(invoke_without_command=True)
app.add_typer(rules_app, name="rules", help="List the rules, or explain one.")

#: ``ctx.meta`` key of the extra rules directories ``tfadvisor rules --rules DIR explain ...`` names.
RULES_DIRS = "rules_dirs"


@rules_app.callback()
def rules_list(ctx: typer.Context, rules: Rules = None, fmt: TextOrJson = "text") -> None:
    """List every rule (id, severity, title)."""
    if ctx.invoked_subcommand is not None:
        ctx.meta[RULES_DIRS] = list(rules or [])
        return
    from tfadvisor.advice import list_rules_text, load_rules

    loaded = load_rules(extra_dirs=list(rules or []))
    if fmt == "json":
        from tfadvisor.report.json_report import rules_to_dict

        typer.echo(json.dumps(rules_to_dict(loaded), indent=2))
        return
    typer.echo(list_rules_text(loaded))


@rules_app.command("explain", cls=Command, short_help="Print one rule in full: what it checks, why, example, fix.")
def rules_explain(
    ctx: typer.Context,
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", show_default=False,
                                           help="Rule id, e.g. input_bound.")],
    fmt: TextOrJson = "text",
) -> None:
    """Print one rule in full: what it checks, why it matters, example, fix."""
    from tfadvisor.advice import explain_rule, load_rules

    rules = load_rules(extra_dirs=ctx.meta.get(RULES_DIRS) or [])
    text = explain_rule(rules, rule_id)
    if text is None:
        fail(f"no rule {rule_id!r}; `tfadvisor rules` lists them")
    if fmt == "json":
        from tfadvisor.report.json_report import rules_to_dict

        typer.echo(json.dumps(rules_to_dict([r for r in rules if r.id == rule_id]), indent=2))
        return
    typer.echo(text)


#: The commands this module defines: ``main`` registers the others only when the command line names none of these.
OWN = ("analyze", "export", "runs", "schema", "mcp", "rules")
_registered: list[bool] = []


def _register_optional() -> None:
    """Commands that live in their own modules (none of them imports TensorFlow at import time). Registers them
    once, however often it is called; the help lists commands first, then groups, each in the order added."""
    if _registered:
        return
    from tfadvisor.cli import capture, diff, scaling

    diff.register(app)
    scaling.register(app)
    capture.register(app)
    _registered.append(True)


def command():
    """The full command line as the click command typer builds (its ``commands``, ``params``): for tests and docs."""
    _register_optional()
    return typer.main.get_command(app)


def main() -> None:
    """Entry point: run the app, turning bad input into one line and exit code 2. The commands of their own modules
    are registered unless the command line names one of this module's (``analyze`` does not import ``capture``'s
    CLI: ~20 ms of every analysis of a small trace)."""
    if not (len(sys.argv) > 1 and sys.argv[1] in OWN):
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
