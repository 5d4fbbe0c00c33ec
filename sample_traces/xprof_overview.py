#!/usr/bin/env python3
"""Run xprof's overview page on a sample and print the key figures as JSON.

Usage::

    python sample_traces/xprof_overview.py sample_traces/input_bound_defaults_off
    python sample_traces/xprof_overview.py path/to/run_dir_or_xplane.pb ...

xprof writes ``ALL_HOSTS.op_stats_v2.pb`` (a cache) into the directory it
reads, so the xplane files are copied into a temporary directory first; the
sample is never modified.  All hosts of one run are analysed together.

Output keys (xprof 2.24.2 overview_page, ``steptime`` table properties):
``steps_found`` (rows of the step-time graph), ``step_time_ms_mean``
(``steptime_ms_average``, rounded by xprof), ``rows_step_time_ms_mean`` and
``rows_input_pct`` (recomputed from the per-step rows), ``input_pct`` (the
"Input" category over step time), ``conclusion_pct`` (the percentage quoted
in ``input_conclusion``: the input share, or the "All Others" share when
xprof says POTENTIALLY input-bound), the per-category averages,
``hardware_type``, ``bottleneck`` and the statement texts.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import tempfile


def find_xplanes(path):
    if os.path.isfile(path):
        return [path]
    files = sorted(glob.glob(os.path.join(path, "**", "*.xplane.pb"),
                             recursive=True))
    runs = sorted({os.path.dirname(f) for f in files})
    if len(runs) > 1:
        raise SystemExit(f"more than one run dir under {path}: {runs}")
    return files


def _float(v):
    try:
        return float(str(v).rstrip("%"))
    except (TypeError, ValueError):
        return None


def overview(paths):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import xprof.version
    from xprof.convert import raw_to_tool_data

    tmp = tempfile.mkdtemp(prefix="xprof_overview_")
    try:
        copies = []
        for p in paths:
            dst = os.path.join(tmp, os.path.basename(p))
            shutil.copyfile(p, dst)
            copies.append(dst)
        data, _ = raw_to_tool_data.xspace_to_tool_data(
            copies, "overview_page", {"use_saved_result": False})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if data is None:
        return {"error": "xprof returned no data",
                "xprof_version": xprof.version.__version__}
    tables = json.loads(data)
    # Table 1 is the step-time graph; its properties carry the averages.
    step_table = next((t for t in tables if any(
        c.get("id") == "stepTimeMs" for c in t.get("cols", []))), {})
    props = step_table.get("p", {})
    analysis = next((t for t in tables if "bottleneck" in t.get("p", {})), {})
    general = tables[0].get("p", {}) if tables else {}
    rows = step_table.get("rows", [])
    out = {
        "xprof_version": xprof.version.__version__,
        "hosts": len(paths),
        "hardware_type": props.get("hardware_type"),
        "steps_found": len(rows),
        "step_names": [r["c"][0]["v"] for r in rows],
        "step_time_ms_mean": _float(props.get("steptime_ms_average")),
        "step_time_ms_min": _float(props.get("steptime_ms_minimum")),
        "step_time_ms_max": _float(props.get("steptime_ms_maximum")),
        "step_time_ms_stddev": _float(props.get("steptime_ms_standard_deviation")),
        "input_pct": None,
        "infeed_ms_avg": _float(props.get("infeed_time_ms_avg")),
        "host_compute_ms_avg": _float(props.get("host_compute_time_ms_avg")),
        "device_compute_ms_avg": _float(props.get("device_compute_time_ms_avg")),
        "kernel_launch_ms_avg": _float(props.get("kernel_launch_time_ms_avg")),
        "compile_ms_avg": _float(props.get("compile_time_ms_avg")),
        "other_ms_avg": _float(props.get("other_time_ms_avg")),
        "device_collectives_ms_avg": _float(
            props.get("device_collectives_time_ms_avg")),
        "host_idle_time_pct": _float(general.get("host_idle_time_percent")),
        "host_op_time_eager_pct": _float(
            general.get("host_op_time_eager_percent")),
        "bottleneck": analysis.get("p", {}).get("bottleneck"),
        "input_conclusion": props.get("input_conclusion"),
        "statement": analysis.get("p", {}).get("statement"),
    }
    # Unrounded figures from the per-step rows.
    ids = [c.get("id") for c in step_table.get("cols", [])]
    if rows and "stepTimeMs" in ids and "infeedTimeMs" in ids:
        st = [r["c"][ids.index("stepTimeMs")]["v"] for r in rows]
        inf = [r["c"][ids.index("infeedTimeMs")]["v"] for r in rows]
        out["rows_step_time_ms_mean"] = round(sum(st) / len(st), 4)
        out["rows_input_pct"] = round(100.0 * sum(inf) / sum(st), 2) \
            if sum(st) else None
    # input_pct: xprof's "Input" category (infeed) over step time.  The
    # number in xprof's conclusion is not always that: when input is low it
    # may quote the "All Others" share ("POTENTIALLY input-bound because
    # N% ... is spent on 'All Others' time"); it is kept as conclusion_pct.
    if "rows_input_pct" in out:
        out["input_pct"] = out["rows_input_pct"]
    elif out["step_time_ms_mean"] and out["infeed_ms_avg"] is not None:
        out["input_pct"] = round(
            100.0 * out["infeed_ms_avg"] / out["step_time_ms_mean"], 1)
    m = re.search(r"([0-9.]+)% of the total step time",
                  props.get("input_conclusion") or "")
    out["conclusion_pct"] = float(m.group(1)) if m else None
    return out


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    paths = []
    for a in argv:
        paths.extend(find_xplanes(a))
    if not paths:
        raise SystemExit(f"no *.xplane.pb under {argv}")
    # xprof's C++ logs go to stderr; stdout is only the JSON.
    print(json.dumps(overview(paths), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
