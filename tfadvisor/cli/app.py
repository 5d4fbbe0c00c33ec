"""The ``tfadvisor`` command line (click).

Bad input is one line on stderr naming the file and the problem, and exit code 2.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click

from tfadvisor.errors import Argument, Command, Group, TraceError, close_options, fail
from tfadvisor.model.interconnects import LINKS

LINK_NAMES = tuple(LINKS)

__all__ = ["Command", "app", "close_options", "main", "parse_count"]


# Plain click help (no type tags, option names never cut at 80 columns); options show their defaults.
@click.group(cls=Group, no_args_is_help=True, context_settings={"show_default": True})
def app() -> None:
    """Read TensorFlow Profiler traces and say why training is slow, and what to change."""


_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGbBtT]?)\s*$")


def parse_count(text: str | int) -> int:
    """A positive whole number: ``25000000``, ``25e6``, ``25M``, ``25.6M``, ``1.2B`` (K, M, G/B, T)."""
    if isinstance(text, int):
        return text
    m = _COUNT.match(str(text).replace(",", "").replace("_", ""))
    if m is None:
        raise click.BadParameter(f"{text!r} is not a number (e.g. 25000000, 25e6, 25M, 1.2B)")
    value = float(m.group(1)) * _SI[m.group(2).lower()]
    if value < 1 or value != int(value):
        raise click.BadParameter(f"{text!r} is not a positive whole number")
    return int(value)


FORMATS = ("text", "json", "markdown")
FAIL_ON = ("warning", "critical")
TEXT_OR_JSON = ("text", "json")
FORMAT_HELP = "Output format: text, or json (tfadvisor schema KIND prints its JSON Schema)."
RULES_HELP = "Extra rules directory (repeatable)."


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


@app.command(short_help="Analyse a profile: summary, then findings, most important first.")
@click.argument("paths", cls=Argument, nargs=-1, required=True, metavar="PATH",
                help="A logdir, a run directory, or .xplane.pb file(s).")
@click.option("--run", metavar="NAME",
              help="Run to analyse (default: the newest): its name, its path under the logdir, "
                   "or a prefix that matches one run only.")
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), default="text", help="Output format.")
@click.option("--html", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write a self-contained HTML report here.")
@click.option("--rules", multiple=True, metavar="DIR", help=RULES_HELP)
@click.option("--params", type=parse_count, metavar="N",
              help="Model parameter count (AllReduce check): 25000000, 25e6 or 25M.")
@click.option("--bandwidth", metavar="GBPS|LINK",
              help="Link bandwidth in GB/s, or a link name: " + ", ".join(LINK_NAMES) + ".")
@click.option("--replicas", type=parse_count, metavar="N", help="Number of replicas (data-parallel workers).")
@click.option("--batch-size", type=parse_count, metavar="N", help="Global batch size.")
@click.option("--data", metavar="PATH", help="Training data files to check (dir or glob, gs:// ok).")
@click.option("--fail-on", type=click.Choice(FAIL_ON), help="Exit 1 when a finding this severe exists.")
@click.option("--jobs", "-j", type=int, metavar="N", help="Worker processes for multi-host runs.")
@click.option("--dask", metavar="ADDRESS", help="Dask scheduler address for multi-host parsing.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--tables", is_flag=True, help="With --format json: add the tables (steps, gaps, ...) "
              "as a \"tables\" key, one object per row.")
@click.option("--full", is_flag=True, help="Text format: every finding's evidence and fix and every note, also for a "
              "run of more than 16 hosts (shown at a glance by default).")
@click.option("--notes", "all_notes", is_flag=True, help="Text format: list every note on what the trace could not "
              "tell (by default only those that change what a finding means; the others are counted).")
def analyze(paths: tuple[str, ...], run: str | None, fmt: str, html: Path | None, rules: tuple[str, ...],
            params: int | None, bandwidth: str | None, replicas: int | None, batch_size: int | None,
            data: str | None, fail_on: str | None, jobs: int | None, dask: str | None, quiet: bool,
            tables: bool, full: bool, all_notes: bool) -> None:
    """Analyse a profile: summary, then findings, most important first."""
    from tfadvisor.api import analyze as run_analysis

    if tables and fmt != "json":
        fail(f"--tables needs --format json (the {fmt} report has no tables)")
    paths_list, rules_list = list(paths), list(rules)
    opts = _options(params, bandwidth, replicas, batch_size)
    bar, update = _progress(paths_list, quiet)
    target = paths_list if len(paths_list) > 1 else paths_list[0]
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
        if not quiet:
            click.echo(f"wrote {html}", err=True)
    if fmt == "json":
        out = result.to_dict()
        if tables:
            from tfadvisor.report.json_report import tables_to_dict

            out["tables"] = tables_to_dict(result.tables)
        click.echo(json.dumps(out, indent=2, default=str))
    elif fmt == "markdown":
        from tfadvisor.report.markdown import render_markdown

        click.echo(render_markdown(result))
    else:
        from tfadvisor.report.terminal import print_result

        print_result(result, full=full, notes=all_notes)
    if fail_on is not None:
        from tfadvisor.advice import severity_at_least

        if any(severity_at_least(f.severity, fail_on) for f in result.findings):
            raise click.exceptions.Exit(1)


@app.command(short_help="Write the trace and tfadvisor's findings as a Perfetto JSON trace.")
@click.argument("path", cls=Argument, metavar="PATH", help="A logdir, a run directory, or an .xplane.pb file.")
@click.argument("out", cls=Argument, type=click.Path(path_type=Path), metavar="OUT.json",
                help="The JSON trace to write (open it in ui.perfetto.dev).")
@click.option("--run", metavar="NAME", help="Run to export (default: the newest).")
@click.option("--max-events", default="1M", metavar="N",
              help="Most trace events to write (e.g. 200K, 1M; 0 for all): beyond it the longest are kept, and "
                   "every event a finding is about.")
@click.option("--rules", multiple=True, metavar="DIR", help=RULES_HELP)
@click.option("--params", type=parse_count, metavar="N",
              help="Model parameter count (AllReduce check), as for analyze.")
@click.option("--bandwidth", metavar="GBPS|LINK", help="Link bandwidth in GB/s, or a link name, as for analyze.")
@click.option("--replicas", type=parse_count, metavar="N", help="Number of replicas (data-parallel workers).")
@click.option("--batch-size", type=parse_count, metavar="N", help="Global batch size.")
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
def export(path: str, out: Path, run: str | None, max_events: str, rules: tuple[str, ...], params: int | None,
           bandwidth: str | None, replicas: int | None, batch_size: int | None, quiet: bool) -> None:
    """Write the trace with tfadvisor's steps, gaps and findings as a Chrome/Perfetto JSON trace.

    The findings are those `tfadvisor analyze` reports for the same options (a multi-host run's
    run-level ones included); the slices they are about carry the rule ids."""
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
    result = run_analysis(chosen, options=opts, rules_dirs=list(rules),
                          trace=trace if len(chosen.files) == 1 else None)
    hosts, run_findings = host_parts(result)
    try:
        counts = write_export(out, trace, hosts, max_events=limit, run_findings=run_findings)
    except OSError as err:
        fail(f"{out}: cannot write: {err.strerror or err}")
    if not quiet:
        left = f", {counts['dropped']:,} shorter ones left out (--max-events)" if counts["dropped"] else ""
        n_findings = len(result.findings)
        click.echo(f"wrote {out}: {counts['written']:,} trace events{left}, {counts['tracks']:,} tfadvisor slices "
                   f"(steps, gaps, {n_findings} finding{'s' if n_findings != 1 else ''}); marked with a finding's "
                   f"rule: {counts['annotated']:,} trace events, {counts['marked_steps']:,} steps, "
                   f"{counts['marked_gaps']:,} gaps", err=True)


def _count_option(text: str, name: str) -> int:
    try:
        return parse_count(text)
    except click.BadParameter as err:
        fail(f"{name}: {err}")


def _inside(path: Path, directory: str) -> bool:
    try:
        return bool(directory) and Path(path).resolve().is_relative_to(Path(directory).resolve())
    except OSError:
        return False


@app.command(short_help="List the profile runs under a logdir and their hosts.")
@click.argument("logdir", cls=Argument, metavar="LOGDIR", help="A TensorBoard logdir.")
@click.option("--format", "-f", "fmt", type=click.Choice(TEXT_OR_JSON), default="text", help=FORMAT_HELP)
def runs(logdir: str, fmt: str) -> None:
    """List the profile runs under a logdir (newest last) and their hosts."""
    from tfadvisor.io.discovery import find_runs

    found = find_runs(logdir)
    if fmt == "json":
        from tfadvisor.report.json_report import runs_to_dict

        click.echo(json.dumps(runs_to_dict(logdir, found), indent=2))
        return
    for r in found:
        click.echo(f"{r.label()}\t{len(r.files)} host(s): {', '.join(r.hosts)}")


@app.command(short_help="Print the JSON Schema of a --format json output.")
@click.argument("kind", cls=Argument, default="analyze", metavar="[analyze|diff|scaling|rules|runs]",
                help="Which output: analyze, diff, scaling, rules or runs.")
def schema(kind: str) -> None:
    """Print the JSON Schema (draft 2020-12) of one --format json output; the versioning policy is in README."""
    from tfadvisor.report.schema import KINDS, shipped

    if kind not in KINDS:
        fail(f"no schema {kind!r}: one of {', '.join(KINDS)}")
    click.echo(shipped(kind), nl=False)


@app.command("mcp", short_help="Serve tfadvisor's tools to coding agents over MCP (stdio).")
def mcp_command() -> None:
    """Run an MCP server on stdin/stdout with tools that mirror this command line (list runs, analyze, diff,
    explain a rule, export a timeline, get a JSON Schema). Needs pip install 'tfadvisor[mcp]'."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        fail("tfadvisor mcp needs the MCP SDK: pip install 'tfadvisor[mcp]'")
    from tfadvisor.cli.mcp_server import serve

    serve()


@app.group("rules", invoke_without_command=True, help="List the rules, or explain one.")
@click.option("--rules", multiple=True, metavar="DIR", help=RULES_HELP)
@click.option("--format", "-f", "fmt", type=click.Choice(TEXT_OR_JSON), default="text", help=FORMAT_HELP)
@click.pass_context
def rules_list(ctx: click.Context, rules: tuple[str, ...], fmt: str) -> None:
    """List every rule (id, severity, title)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = list(rules)
        return
    from tfadvisor.advice import list_rules_text, load_rules

    loaded = load_rules(extra_dirs=list(rules))
    if fmt == "json":
        from tfadvisor.report.json_report import rules_to_dict

        click.echo(json.dumps(rules_to_dict(loaded), indent=2))
        return
    click.echo(list_rules_text(loaded))


@rules_list.command("explain", short_help="Print one rule in full: what it checks, why, example, fix.")
@click.argument("rule_id", cls=Argument, metavar="RULE_ID", help="Rule id, e.g. input_bound.")
@click.option("--format", "-f", "fmt", type=click.Choice(TEXT_OR_JSON), default="text", help=FORMAT_HELP)
@click.pass_context
def rules_explain(ctx: click.Context, rule_id: str, fmt: str) -> None:
    """Print one rule in full: what it checks, why it matters, example, fix."""
    from tfadvisor.advice import explain_rule, load_rules

    rules = load_rules(extra_dirs=ctx.obj or [])
    text = explain_rule(rules, rule_id)
    if text is None:
        fail(f"no rule {rule_id!r}; `tfadvisor rules` lists them")
    if fmt == "json":
        from tfadvisor.report.json_report import rules_to_dict

        click.echo(json.dumps(rules_to_dict([r for r in rules if r.id == rule_id]), indent=2))
        return
    click.echo(text)


def _register_optional() -> None:
    """Commands that live in their own modules (none of them imports TensorFlow at import time).
    Registers them once, however often it is called; the help lists commands first, then groups."""
    if "capture" in app.commands:
        return
    from tfadvisor.cli.capture import app as capture_app
    from tfadvisor.cli.diff import diff_command
    from tfadvisor.cli.scaling import scaling_command

    app.add_command(diff_command, "diff")
    app.add_command(scaling_command, "scaling")
    app.add_command(capture_app, "capture")


def main() -> None:
    """Entry point: run the app, turning bad input into one line and exit code 2. The commands of their own modules
    are registered unless the command line names one of this module's (``analyze`` does not import ``capture``'s
    CLI: ~20 ms of every analysis of a small trace)."""
    if not (len(sys.argv) > 1 and sys.argv[1] in app.commands):
        _register_optional()
    try:
        app()  # standalone: usage errors print usage and exit 2
    except TraceError as err:
        click.echo(f"tfadvisor: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        if os.environ.get("TFADVISOR_DEBUG"):
            raise
        click.echo(f"tfadvisor: internal error: {type(err).__name__}: {err} (set TFADVISOR_DEBUG=1 for details)",
                   err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
