"""``tfadvisor diff BEFORE AFTER [--format text|json] [--fail-on-regression PCT]``: analyse both profiles
and print the comparison (:mod:`tfadvisor.report.diff`); with ``--fail-on-regression`` exit 1 when the
verdict is a significant regression (slower, outside the steps' noise) of more than PCT %, and 2 when
either profile has no step time."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tfadvisor.cli.common import Command
from tfadvisor.errors import fail


def diff_command(
    before: Annotated[str, typer.Argument(metavar="BEFORE", show_default=False,
                                          help="The profile before the change (logdir, run dir or .xplane.pb).")],
    after: Annotated[str, typer.Argument(metavar="AFTER", show_default=False, help="The profile after the change.")],
    fmt: Annotated[str, typer.Option("--format", "-f", metavar="text|json",
                                     help="Output format: text or json.")] = "text",
    fail_on_regression: Annotated[float | None, typer.Option(
        metavar="PCT", help="Exit 1 when the step time got significantly slower (beyond the steps' noise) by more than "
                            "PCT %; 2 when a profile has no step time.")] = None,
    run_before: Annotated[str | None, typer.Option(metavar="NAME",
                                                   help="Run to use in BEFORE (default: newest).")] = None,
    run_after: Annotated[str | None, typer.Option(metavar="NAME",
                                                  help="Run to use in AFTER (default: newest).")] = None,
    rules: Annotated[list[str] | None, typer.Option(metavar="DIR", show_default=False,
                                                    help="Extra rules directory (repeatable).")] = None,
) -> None:
    """Compare two profiles: step time, breakdown, input, gaps, precision, memory, AllReduce, findings."""
    from tfadvisor.api import analyze
    from tfadvisor.report.diff import diff_results, render_text

    if fmt not in ("text", "json"):
        fail(f"--format must be text or json, not {fmt!r}")
    rb = analyze(before, run=run_before, rules_dirs=list(rules or []))
    ra = analyze(after, run=run_after, rules_dirs=list(rules or []))
    d = diff_results(rb, ra)
    if fmt == "json":
        typer.echo(json.dumps(d, indent=2, default=str))
    else:
        render_text(d)
    if fail_on_regression is not None:
        pct = d.get("verdict_change_pct", d["step_time"]["change_pct"])
        if pct is None:  # a gate that cannot judge must not pass
            st = d["step_time"]
            side = "before" if st["before_ms"] is None or st["before_ms"] <= 0 else "after"
            where = d[side].get("directory") or d[side]["run"]
            fail(f"{where}: no step time in the {side} profile: --fail-on-regression cannot judge it")
        if d["verdict"] == "slower" and pct > fail_on_regression:  # within the noise is no regression
            what = {"throughput": "throughput", "unprofiled": "the unprofiled step time"}.get(d.get("verdict_on"),
                                                                                              "step time")
            fail(f"{what} regressed by {pct:.1f} % (> {fail_on_regression:g} %)", code=1)


def register(app: typer.Typer) -> None:
    """Add ``diff`` to the root command."""
    app.command("diff", cls=Command, short_help="Compare two profiles: step time, breakdown, input, gaps.")(
        diff_command)


__all__ = ["diff_command", "register"]
