"""``tfadvisor diff BEFORE AFTER [--format text|json] [--fail-on-regression PCT]``: analyse both profiles
and print the comparison (:mod:`tfadvisor.report.diff`); with ``--fail-on-regression`` exit 1 when the
verdict is a significant regression (slower, outside the steps' noise) of more than PCT %, and 2 when
either profile has no step time."""

from __future__ import annotations

import json

import typer

from tfadvisor.report.diff import diff_results, render_text


def diff_command(
    before: str = typer.Argument(..., metavar="BEFORE",
                                 help="The profile before the change (logdir, run dir or .xplane.pb)."),
    after: str = typer.Argument(..., metavar="AFTER", help="The profile after the change."),
    fmt: str = typer.Option("text", "--format", "-f", metavar="text|json", help="Output format: text or json."),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT",
        help="Exit 1 when the step time got significantly slower (beyond the steps' noise) by more than PCT %; 2 "
             "when a profile has no step time."),
    run_before: str | None = typer.Option(None, "--run-before", metavar="NAME",
                                          help="Run to use in BEFORE (default: newest)."),
    run_after: str | None = typer.Option(None, "--run-after", metavar="NAME",
                                         help="Run to use in AFTER (default: newest)."),
    rules: list[str] = typer.Option([], "--rules", metavar="DIR", help="Extra rules directory (repeatable)."),
) -> None:
    """Compare two profiles: step time, breakdown, input, gaps, precision, memory, AllReduce, findings."""
    from tfadvisor.api import analyze

    if fmt not in ("text", "json"):
        typer.echo(f"tfadvisor: --format must be text or json, not {fmt!r}", err=True)
        raise typer.Exit(2)
    rb = analyze(before, run=run_before, rules_dirs=rules)
    ra = analyze(after, run=run_after, rules_dirs=rules)
    d = diff_results(rb, ra)
    if fmt == "json":
        typer.echo(json.dumps(d, indent=2, default=str))
    else:
        render_text(d)
    if fail_on_regression is not None:
        pct = d["step_time"]["change_pct"]
        if pct is None:  # a gate that cannot judge must not pass
            st = d["step_time"]
            side = "before" if st["before_ms"] is None or st["before_ms"] <= 0 else "after"
            where = d[side].get("directory") or d[side]["run"]
            typer.echo(f"tfadvisor: {where}: no step time in the {side} profile: --fail-on-regression cannot "
                       "judge it", err=True)
            raise typer.Exit(2)
        if d["verdict"] == "slower" and pct > fail_on_regression:  # within the noise is no regression
            typer.echo(f"tfadvisor: step time regressed by {pct:.1f} % (> {fail_on_regression:g} %)", err=True)
            raise typer.Exit(1)


__all__ = ["diff_command"]
