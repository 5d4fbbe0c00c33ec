"""Analysis at the end of a capture window: :func:`tfadvisor.api.analyze` on the run just written, the
terminal report (its top findings) and the JSON/HTML reports asked for. Problems are warnings: the
profile is kept and training goes on. The facade and the reporters are imported on first use."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from tfadvisor.capture.base import logger, say, warn

if TYPE_CHECKING:
    from tfadvisor.api import Result


def analyze_run(run_dir: str, *, report_json: str | os.PathLike | None = None,
                report_html: str | os.PathLike | None = None, top: int = 3, verbose: bool = True,
                stream: TextIO | None = None) -> Result | None:
    """Analyse a finished capture, log the top findings, print the report, write reports; the Result or None."""
    import tfadvisor.api as api

    try:
        result = api.analyze(run_dir)
    except Exception as err:  # noqa: BLE001 - analysis never breaks training
        warn(f"analysis of {run_dir} failed: {type(err).__name__}: {err}; "
             f"the profile is kept, run `tfadvisor analyze {run_dir}` later")
        return None
    top = max(1, top)
    for f in result.findings[:top]:
        logger.info("finding %s [%s]: %s", f.rule, f.severity, f.message)
    if verbose:
        try:
            print_report(result, run_dir, top=top, stream=stream)
        except Exception as err:  # noqa: BLE001
            warn(f"could not print the report of {run_dir}: {type(err).__name__}: {err}")
    if report_json:
        _write_report(result, report_json, "JSON", _write_json)
    if report_html:
        _write_report(result, report_html, "HTML", _write_html)
    return result


def capture_console(out: TextIO | None = None):
    """A rich Console on ``out`` (default stdout) for capture's reports: a closed pipe raises ``BrokenPipeError``
    (which capture turns into a warning) instead of rich's ``SystemExit``, which would end training."""
    from rich.console import Console

    class _CaptureConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError("the output stream's reader is gone")

    return _CaptureConsole(file=out or sys.stdout, highlight=False)


def print_report(result: Result, run_dir: str, *, top: int = 3, stream: TextIO | None = None) -> None:
    """The brief terminal report (summary, the ``top`` findings' titles and messages), then one line: steps,
    findings, the command for the full report."""
    from tfadvisor.report.terminal import print_result

    out = stream or sys.stdout
    findings = result.findings
    shown = result if len(findings) <= top else dataclasses.replace(result, findings=findings[:top])
    print_result(shown, capture_console(out), brief=True)
    hidden = f" ({len(findings) - top} not shown)" if len(findings) > top else ""
    m = result.metrics
    times = ""
    st, tp = m.get("step_time_mean_ms"), m.get("throughput_ms_per_step")
    if isinstance(st, (int, float)) and isinstance(tp, (int, float)):
        times = (f" (step time {st:.3g} ms, throughput {tp:.3g} ms per step with evaluation and epoch ends"
                 + (f", unprofiled {m['unprofiled_ms_per_step']:.3g} ms by the clock over the "
                    f"{m.get('unprofiled_steps_count')} steps timed outside the window so far" if isinstance(
                     m.get("unprofiled_ms_per_step"), (int, float)) else "") + ")")
    say(f"tfadvisor: {m.get('steps_count') or 0} step(s) found{times}, {len(findings)} finding(s){hidden}; "
        f"full report: tfadvisor analyze {run_dir}", out)


def _write_json(result: Result, path: str | os.PathLike) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result.to_dict(), fh, indent=2, default=str)
        fh.write("\n")


def _write_html(result: Result, path: str | os.PathLike) -> None:
    from tfadvisor.report.html import write_html

    write_html(result, path)


def _write_report(result: Result, path: str | os.PathLike, kind: str,
                  write: Callable[[Result, str | os.PathLike], None]) -> None:
    try:
        write(result, path)
        logger.info("wrote %s", path)
    except Exception as err:  # noqa: BLE001
        warn(f"could not write the {kind} report {path}: {type(err).__name__}: {err}")
