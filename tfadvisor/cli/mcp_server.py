"""``tfadvisor mcp``: an MCP server (stdio) for coding agents, built on the official ``mcp`` SDK
(``pip install 'tfadvisor[mcp]'``). Its tools mirror the command line and return the documents of the
JSON contract (``tfadvisor schema KIND``), with their sizes bounded for large traces:

* ``list_runs(logdir)`` -> the ``runs`` document;
* ``analyze(path, run, tables, max_rows, max_findings, ...)`` -> the ``analyze`` document: summary,
  findings, metrics and notes; tables only those asked for, each cut to ``max_rows`` rows; what was cut
  is listed under ``truncated``;
* ``explain_rule(rule_id)`` and ``list_rules()`` -> the ``rules`` document;
* ``diff(before, after)`` -> the ``diff`` document;
* ``export_timeline(path, out, max_events)`` -> where the Perfetto JSON was written and what it holds;
* ``get_schema(kind)`` -> a JSON Schema.

Bad input is a tool error carrying the same one line as the command line's (the file and the problem),
never a traceback. The SDK is imported only here, only by ``tfadvisor mcp``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfadvisor._version import __version__

INSTRUCTIONS = (
    "tfadvisor reads TensorFlow Profiler traces (<logdir>/plugins/profile/<run>/<host>.xplane.pb) and says why "
    "training is slow and what to change. Start with list_runs(logdir) or analyze(path): findings are ordered "
    "most important first, each with evidence (metric -> value) and a fix with code. diff(before, after) judges "
    "a change. get_schema(kind) gives the JSON Schema of each result."
)
#: Bounds on what one call returns (a large trace must not flood the client's context).
DEFAULT_MAX_ROWS = 50
DEFAULT_MAX_FINDINGS = 20
MAX_ROWS_LIMIT = 10_000
MAX_LIST = 200  # longest list kept anywhere else in a document (notes, planes, line names)


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input and failures become a tool error with one clear line (as the CLI prints), not a traceback."""
    from mcp.server.mcpserver.exceptions import ToolError

    from tfadvisor.errors import TraceError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except TraceError as err:
            raise ToolError(f"tfadvisor: {err}") from None
        except (ValueError, OSError) as err:
            raise ToolError(f"tfadvisor: {err}") from None
        except Exception as err:  # noqa: BLE001 - an agent gets one line, never a traceback
            raise ToolError(f"tfadvisor: internal error: {type(err).__name__}: {err}") from None

    return wrapper


def _cut(items: list[Any], limit: int, where: str, truncated: dict[str, int]) -> list[Any]:
    if len(items) > limit:
        truncated[where] = len(items)
        return items[:limit]
    return items


def bounded_analysis(result: Any, *, tables: list[str] | None, max_rows: int, max_findings: int) -> dict[str, Any]:
    """The ``analyze`` document of ``result`` with its lists bounded; ``truncated`` says what was cut."""
    from tfadvisor.report.json_report import tables_to_dict

    doc = json.loads(json.dumps(result.to_dict(), default=str))
    truncated: dict[str, int] = {}
    doc["findings"] = _cut(doc["findings"], max_findings, "findings", truncated)
    doc["notes"] = _cut(doc["notes"], MAX_LIST, "notes", truncated)
    loaded = doc["summary"]["loaded"]
    loaded["files"] = _cut(loaded.get("files", []), MAX_LIST, "summary.loaded.files", truncated)
    loaded["planes"] = _cut(loaded.get("planes", []), MAX_LIST, "summary.loaded.planes", truncated)
    for i, plane in enumerate(loaded["planes"]):
        plane["line_names"] = _cut(plane.get("line_names", []), MAX_LIST, f"summary.loaded.planes.{i}.line_names",
                                   truncated)
    doc["hosts"] = _cut(doc["hosts"], MAX_LIST, "hosts", truncated)
    if tables:
        have = set(result.tables)
        unknown = [t for t in tables if t not in have]
        if unknown:
            raise ValueError(f"no table {', '.join(map(repr, unknown))} in this result; it has: "
                             f"{', '.join(sorted(have)) or 'none'}")
        picked = {name: result.tables[name] for name in tables}
        out = json.loads(json.dumps(tables_to_dict(picked), default=str))
        doc["tables"] = {name: _cut(rows, max_rows, f"tables.{name}", truncated) for name, rows in out.items()}
    if truncated:
        doc["truncated"] = truncated
    return doc


def build_server():
    """The MCP server with tfadvisor's tools (the ``mcp`` SDK's ``MCPServer``)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="tfadvisor", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(description="List the profile runs under a TensorBoard logdir (newest last) and their hosts. "
                             "Returns the 'runs' document (get_schema('runs')).")
    @_tool_errors
    def list_runs(logdir: str) -> dict[str, Any]:
        from tfadvisor.io.discovery import find_runs
        from tfadvisor.report.json_report import runs_to_dict

        return runs_to_dict(logdir, find_runs(logdir))

    @server.tool(description="Analyse a profile (a logdir: its newest run, a run directory, or an .xplane.pb "
                             "file): summary, findings (most important first, with evidence and a fix), metrics, "
                             "notes. tables: names of tables to include (e.g. ['steps', 'host_ops']), each cut to "
                             "max_rows rows. Returns the 'analyze' document (get_schema('analyze')); lists cut to "
                             "bound the size are listed under 'truncated'.")
    @_tool_errors
    def analyze(path: str, run: str | None = None, tables: list[str] | None = None,
                max_rows: int = DEFAULT_MAX_ROWS, max_findings: int = DEFAULT_MAX_FINDINGS,
                params: int | None = None, bandwidth: str | None = None, replicas: int | None = None,
                batch_size: int | None = None) -> dict[str, Any]:
        from tfadvisor.api import analyze as run_analysis

        if not 1 <= max_rows <= MAX_ROWS_LIMIT:
            raise ValueError(f"max_rows must be between 1 and {MAX_ROWS_LIMIT}, got {max_rows}")
        if max_findings < 1:
            raise ValueError(f"max_findings must be >= 1, got {max_findings}")
        result = run_analysis(path, run=run, options=_options(params, bandwidth, replicas, batch_size))
        return bounded_analysis(result, tables=tables, max_rows=max_rows, max_findings=max_findings)

    @server.tool(description="Compare two profiles (before, after): the verdict on step time with its noise "
                             "interval, figures before/after, findings fixed, new and remaining. Returns the "
                             "'diff' document (get_schema('diff')).")
    @_tool_errors
    def diff(before: str, after: str) -> dict[str, Any]:
        from tfadvisor.api import analyze as run_analysis
        from tfadvisor.report.diff import diff_results

        return json.loads(json.dumps(diff_results(run_analysis(before), run_analysis(after)), default=str))

    @server.tool(description="One rule in full: when it fires, why it matters, the fix. Returns the 'rules' "
                             "document with that rule (get_schema('rules')).")
    @_tool_errors
    def explain_rule(rule_id: str) -> dict[str, Any]:
        from tfadvisor.advice import load_rules
        from tfadvisor.report.json_report import rules_to_dict

        rules = [r for r in load_rules() if r.id == rule_id]
        if not rules:
            raise ValueError(f"no rule {rule_id!r}; list_rules() lists them")
        return rules_to_dict(rules)

    @server.tool(description="Every rule tfadvisor applies. Returns the 'rules' document (get_schema('rules')).")
    @_tool_errors
    def list_rules() -> dict[str, Any]:
        from tfadvisor.advice import load_rules
        from tfadvisor.report.json_report import rules_to_dict

        return rules_to_dict(load_rules())

    @server.tool(description="Write the trace with tfadvisor's steps, gaps and findings as a Chrome/Perfetto "
                             "JSON trace at 'out' (open it in ui.perfetto.dev); at most max_events trace events. "
                             "Returns where it was written and what it holds.")
    @_tool_errors
    def export_timeline(path: str, out: str, max_events: int = 1_000_000, run: str | None = None) -> dict[str, Any]:
        from tfadvisor.api import analyze as run_analysis
        from tfadvisor.io.discovery import resolve
        from tfadvisor.io.reader import load_run
        from tfadvisor.report.perfetto import host_parts, write_export

        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        chosen = resolve(path, run=run)
        target = Path(out).resolve()
        if target.is_relative_to(Path(chosen.directory).resolve()):
            raise ValueError(f"{out}: will not write into the profile directory it reads ({chosen.directory})")
        trace = load_run(chosen)
        result = run_analysis(chosen, trace=trace if len(chosen.files) == 1 else None)
        hosts, run_findings = host_parts(result)
        counts = write_export(str(target), trace, hosts, max_events=max_events, run_findings=run_findings)
        return {"out": str(target), "findings": len(result.findings), **{k: int(v) for k, v in counts.items()}}

    @server.tool(description="The JSON Schema (draft 2020-12) of a result: analyze, diff, scaling, rules or runs.")
    @_tool_errors
    def get_schema(kind: str = "analyze") -> dict[str, Any]:
        from tfadvisor.report.schema import KINDS, shipped

        if kind not in KINDS:
            raise ValueError(f"no schema {kind!r}: one of {', '.join(KINDS)}")
        return json.loads(shipped(kind))

    return server


def _options(params: int | None, bandwidth: str | None, replicas: int | None, batch_size: int | None):
    from tfadvisor.analyses import Options

    opts = Options(param_count=params, replicas=replicas, batch_size=batch_size)
    if bandwidth:
        from tfadvisor.model.interconnects import bandwidth_gbps

        opts.bandwidth_gbps = bandwidth_gbps(bandwidth)  # ValueError: a tool error naming the link
        opts.link = bandwidth
    return opts


def serve() -> None:
    """Run the server over stdio until the client closes it."""
    build_server().run("stdio")


__all__ = ["bounded_analysis", "build_server", "serve"]
