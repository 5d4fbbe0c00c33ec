"""The ``tfadvisor`` command line (typer).

Bad input is one line on stderr naming the file and the problem, and exit code 2.
"""

from __future__ import annotations

import json
import os
import re
import sys
from difflib import SequenceMatcher
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

from tfadvisor.errors import TraceError, fail
from tfadvisor.interconnects import LINKS

LINK_NAMES = tuple(LINKS)


_CLICK_NAMES = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "Path": "PATH", "bool": "BOOLEAN"}


def _click_metavar(self: Any, ctx: Any) -> str:
    """An option's value as click names it (``[text|json]``, ``INTEGER``, ``TEXT``), never typer's
    ``<type>`` tag (``<list[str]>``, ``<int>``); options with their own ``metavar`` keep it."""
    desc = self.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    if desc.is_path:
        return "PATH"
    bare = self.bare_type()
    if bare.startswith("list[") and bare.endswith("]"):
        bare = bare[5:-1]
    return _CLICK_NAMES.get(bare, "TEXT")


# Plain click help for every command (capture's and the optional ones too): an argument is its
# metavar alone, an option's value a click metavar.
TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]
TyperArgument._usage_display_name = lambda self: (  # type: ignore[method-assign]
    (self.display_name_raw if self.required else f"[{self.display_name_raw}]")
    + ("..." if self.nargs != 1 and not self.display_name_raw.endswith("...") else ""))
TyperOption.display_type = _click_metavar  # type: ignore[method-assign]

#: The one-line summary of each command in a command list (it must fit 80 columns whole).
SUMMARIES = {
    ("capture", "service"): "Capture from a running program's profiler server(s).",
    ("capture", "run"): "Run a training script with the profiler armed, then analyse.",
    ("capture", "vertex"): "Run a training script on Vertex AI with profiling, then analyse.",
}

# Plain (click) help: no type tags, option names never cut at 80 columns.
app = typer.Typer(
    help="Read TensorFlow Profiler traces and say why training is slow, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
rules_app = typer.Typer(help="List the rules, or explain one.", invoke_without_command=True, rich_markup_mode=None)
app.add_typer(rules_app, name="rules")


class Command(TyperCommand):
    """A command whose "no such option" error suggests only options that look like the one typed."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except Exception as err:  # typer's own copy of click's NoSuchOption
            if hasattr(err, "option_name") and hasattr(err, "possibilities"):
                err.possibilities = close_options(err.option_name, err.possibilities or []) or None
            raise


def close_options(typed: str, candidates: list[str]) -> list[str]:
    """The candidates whose names (dashes left out) are spelled much like ``typed``."""
    name = typed.lstrip("-").lower()
    return [c for c in candidates if SequenceMatcher(None, name, c.lstrip("-").lower()).ratio() >= 0.75
            or (len(name) >= 3 and c.lstrip("-").lower().startswith(name))]


_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGbBtT]?)\s*$")


def parse_count(text: str | int) -> int:
    """A positive whole number: ``25000000``, ``25e6``, ``25M``, ``25.6M``, ``1.2B`` (K, M, G/B, T)."""
    if isinstance(text, int):
        return text
    m = _COUNT.match(str(text).replace(",", "").replace("_", ""))
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a number (e.g. 25000000, 25e6, 25M, 1.2B)")
    value = float(m.group(1)) * _SI[m.group(2).lower()]
    if value < 1 or value != int(value):
        raise typer.BadParameter(f"{text!r} is not a positive whole number")
    return int(value)


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    warning = "warning"
    critical = "critical"


def _options(params: int | None, bandwidth: str | None, replicas: int | None, batch_size: int | None):
    from tfadvisor.analyses import Options

    opts = Options(param_count=params, replicas=replicas, batch_size=batch_size)
    if bandwidth:
        from tfadvisor.interconnects import bandwidth_gbps

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
    paths: list[str] = typer.Argument(..., help="A logdir, a run directory, or .xplane.pb file(s).",
                                      metavar="PATH"),
    run: str | None = typer.Option(None, "--run", metavar="NAME",
                                   help="Run to analyse (default: the newest): its name, its path under the logdir, "
                                        "or a prefix that matches one run only."),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE",
                                     help="Also write a self-contained HTML report here."),
    rules: list[str] = typer.Option([], "--rules", metavar="DIR", help="Extra rules directory (repeatable)."),
    params: int | None = typer.Option(None, "--params", parser=parse_count, metavar="N",
                                      help="Model parameter count (AllReduce check): 25000000, 25e6 or 25M."),
    bandwidth: str | None = typer.Option(None, "--bandwidth", metavar="GBPS|LINK",
                                         help="Link bandwidth in GB/s, or a link name: " + ", ".join(LINK_NAMES)
                                         + "."),
    replicas: int | None = typer.Option(None, "--replicas", parser=parse_count, metavar="N",
                                        help="Number of replicas (data-parallel workers)."),
    batch_size: int | None = typer.Option(None, "--batch-size", parser=parse_count, metavar="N",
                                          help="Global batch size."),
    data: str | None = typer.Option(None, "--data", metavar="PATH",
                                    help="Training data files to check (dir or glob, gs:// ok)."),
    fail_on: FailOn | None = typer.Option(None, "--fail-on", help="Exit 1 when a finding this severe exists."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", metavar="N", help="Worker processes for multi-host runs."),
    dask: str | None = typer.Option(None, "--dask", metavar="ADDRESS",
                                    help="Dask scheduler address for multi-host parsing."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    tables: bool = typer.Option(False, "--tables", help="With --format json: add the tables (steps, gaps, ...) "
                                "as a \"tables\" key, one object per row."),
) -> None:
    """Analyse a profile: summary, then findings, most important first."""
    from tfadvisor.api import analyze as run_analysis

    if tables and fmt is not Format.json:
        fail(f"--tables needs --format json (the {fmt.value} report has no tables)")
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

        try:
            write_html(result, html)
        except OSError as err:  # a parent that is a file, no permission, a full disk: bad input, not a crash
            fail(f"{html}: cannot write the HTML report ({err.strerror or type(err).__name__})")
        if not quiet:
            typer.echo(f"wrote {html}", err=True)
    if fmt is Format.json:
        out = result.to_dict()
        if tables:
            from tfadvisor.report.json_report import tables_to_dict

            out["tables"] = tables_to_dict(result.tables)
        typer.echo(json.dumps(out, indent=2, default=str))
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


@app.command(cls=Command, short_help="Write the trace and tfadvisor's findings as a Perfetto JSON trace.")
def export(
    path: str = typer.Argument(..., help="A logdir, a run directory, or an .xplane.pb file.", metavar="PATH"),
    out: Path = typer.Argument(..., help="The JSON trace to write (open it in ui.perfetto.dev).", metavar="OUT.json"),
    run: str | None = typer.Option(None, "--run", metavar="NAME", help="Run to export (default: the newest)."),
    max_events: str = typer.Option("1M", "--max-events", metavar="N",
                                   help="Most trace events to write (e.g. 200K, 1M; 0 for all): beyond it the "
                                   "longest are kept, and every event a finding is about."),
    rules: list[str] = typer.Option([], "--rules", metavar="DIR", help="Extra rules directory (repeatable)."),
    params: int | None = typer.Option(None, "--params", parser=parse_count, metavar="N",
                                      help="Model parameter count (AllReduce check), as for analyze."),
    bandwidth: str | None = typer.Option(None, "--bandwidth", metavar="GBPS|LINK",
                                         help="Link bandwidth in GB/s, or a link name, as for analyze."),
    replicas: int | None = typer.Option(None, "--replicas", parser=parse_count, metavar="N",
                                        help="Number of replicas (data-parallel workers)."),
    batch_size: int | None = typer.Option(None, "--batch-size", parser=parse_count, metavar="N",
                                          help="Global batch size."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary line on stderr."),
) -> None:
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
    result = run_analysis(chosen, options=opts, rules_dirs=rules, trace=trace if len(chosen.files) == 1 else None)
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
        raise


def _inside(path: Path, directory: str) -> bool:
    try:
        return bool(directory) and Path(path).resolve().is_relative_to(Path(directory).resolve())
    except OSError:
        return False


class TextOrJson(str, Enum):
    text = "text"
    json = "json"


FORMAT_HELP = "Output format: text, or json (tfadvisor schema KIND prints its JSON Schema)."


@app.command(cls=Command, short_help="List the profile runs under a logdir and their hosts.")
def runs(
    logdir: str = typer.Argument(..., help="A TensorBoard logdir.", metavar="LOGDIR"),
    fmt: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help=FORMAT_HELP),
) -> None:
    """List the profile runs under a logdir (newest last) and their hosts."""
    from tfadvisor.io.discovery import find_runs

    found = find_runs(logdir)
    if fmt is TextOrJson.json:
        from tfadvisor.report.json_report import runs_to_dict

        typer.echo(json.dumps(runs_to_dict(logdir, found), indent=2))
        return
    for r in found:
        typer.echo(f"{r.label()}\t{len(r.files)} host(s): {', '.join(r.hosts)}")


@app.command(cls=Command, short_help="Print the JSON Schema of a --format json output.")
def schema(
    kind: str = typer.Argument("analyze", metavar="[analyze|diff|scaling|rules|runs]",
                               help="Which output: analyze, diff, scaling, rules or runs."),
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
    from tfadvisor.mcp_server import serve

    serve()


@rules_app.callback()
def rules_list(
    ctx: typer.Context,
    rules: list[str] = typer.Option([], "--rules", metavar="DIR", help="Extra rules directory (repeatable)."),
    fmt: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help=FORMAT_HELP),
) -> None:
    """List every rule (id, severity, title)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = rules
        return
    from tfadvisor.advice import list_rules_text, load_rules

    loaded = load_rules(extra_dirs=rules)
    if fmt is TextOrJson.json:
        from tfadvisor.report.json_report import rules_to_dict

        typer.echo(json.dumps(rules_to_dict(loaded), indent=2))
        return
    typer.echo(list_rules_text(loaded))


@rules_app.command("explain", short_help="Print one rule in full: what it checks, why, example, fix.")
def rules_explain(
    ctx: typer.Context,
    rule_id: str = typer.Argument(..., help="Rule id, e.g. input_bound.", metavar="RULE_ID"),
    fmt: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help=FORMAT_HELP),
) -> None:
    """Print one rule in full: what it checks, why it matters, example, fix."""
    from tfadvisor.advice import explain_rule, load_rules

    rules = load_rules(extra_dirs=ctx.obj or [])
    text = explain_rule(rules, rule_id)
    if text is None:
        fail(f"no rule {rule_id!r}; `tfadvisor rules` lists them")
    if fmt is TextOrJson.json:
        from tfadvisor.report.json_report import rules_to_dict

        typer.echo(json.dumps(rules_to_dict([r for r in rules if r.id == rule_id]), indent=2))
        return
    typer.echo(text)


def _register_optional() -> None:
    """Commands that live in their own modules (none of them imports TensorFlow at import time).
    Registers them once, however often it is called."""
    if any(g.name == "capture" for g in app.registered_groups):
        return
    from tfadvisor.capture.cli import app as capture_app
    from tfadvisor.diff_cli import diff_command
    from tfadvisor.multihost_cli import scaling_command

    for info in capture_app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        info.short_help = info.short_help or SUMMARIES.get(("capture", name))
    app.add_typer(capture_app, name="capture", short_help="Capture a profile: from a profiler server, or run a script.")
    app.command("diff", cls=Command,
                short_help="Compare two profiles: step time, breakdown, input, gaps.")(diff_command)
    app.command("scaling", cls=Command, short_help="Scaling efficiency across runs at different replica counts.")(
        scaling_command)


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
