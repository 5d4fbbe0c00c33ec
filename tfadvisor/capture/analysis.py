"""Analysis at the end of a capture window: :func:`tfadvisor.api.analyze` on the run just written,
a short summary and the reports asked for. Problems are warnings: the profile is kept."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tfadvisor.capture.base import logger, warn


def analyze_run(run_dir: str, *, report_json: str | os.PathLike | None = None,
                report_html: str | os.PathLike | None = None, top: int = 3, verbose: bool = True,
                header: str | None = None, stream=None):
    """Analyse a finished capture, log the top findings, write reports; the Result or None."""
    import tfadvisor.api as api

    try:
        result = api.analyze(run_dir)
    except Exception as err:  # noqa: BLE001 - analysis never breaks training
        warn(f"analysis of {run_dir} failed: {type(err).__name__}: {err}; "
             f"the profile is kept, run `tfadvisor analyze {run_dir}` later")
        return None
    lines = summary_lines(result, top=top, run_dir=run_dir)
    if header:
        lines.insert(0, header)
    for f in list(getattr(result, "findings", []) or [])[:top]:
        logger.info("finding %s [%s]: %s", _get(f, "rule"), _get(f, "severity"), _get(f, "message") or "")
    if verbose:
        out = stream or sys.stdout
        for line in lines:
            print(line, file=out, flush=True)
    if report_json:
        write_json_report(result, report_json)
    if report_html:
        try:
            from tfadvisor.report.html import write_html

            write_html(result, report_html)
            logger.info("wrote %s", report_html)
        except Exception as err:  # noqa: BLE001
            warn(f"could not write the HTML report {report_html}: {type(err).__name__}: {err}")
    return result


def write_json_report(result, path) -> None:
    try:
        data = result.to_dict()
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.write("\n")
        logger.info("wrote %s", path)
    except Exception as err:  # noqa: BLE001
        warn(f"could not write the JSON report {path}: {type(err).__name__}: {err}")


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    return getattr(value, "value", value) if name == "severity" and not isinstance(value, str) else value


def summary_lines(result, top: int = 3, run_dir: str | None = None) -> list[str]:
    """A few ``tfadvisor: ...`` lines: steps, step time, the top findings, how to see more."""
    m = getattr(result, "metrics", {}) or {}
    lines = []
    steps = m.get("steps_count")
    median = m.get("step_time_median_ms")
    if steps is not None:
        tail = f", {median:.3g} ms per step (median)" if isinstance(median, (int, float)) else ""
        lines.append(f"tfadvisor: {steps} step(s) found{tail}")
    findings = list(getattr(result, "findings", []) or [])
    if not findings:
        lines.append("tfadvisor: no findings")
    else:
        lines.append(f"tfadvisor: {len(findings)} finding(s), top {min(top, len(findings))}:")
        for i, f in enumerate(findings[:top], 1):
            title = _get(f, "title") or _get(f, "message") or ""
            lines.append(f"tfadvisor:   {i}. [{_get(f, 'severity')}] {_get(f, 'rule')}: {title}")
    target = run_dir or getattr(getattr(result, "run", None), "directory", None)
    if target:
        lines.append(f"tfadvisor: full report: tfadvisor analyze {target}")
    return lines
