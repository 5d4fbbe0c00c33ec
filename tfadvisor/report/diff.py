"""Compare two profiles: did the change make training faster, and which findings did it fix?

``diff_results(before, after) -> dict`` puts the headline figures side by side (step time,
where the step time goes, input, idle gaps, precision, memory peak, AllReduce, eager and
Python overhead, system utilisation and start-up where the captures sampled them) with the
change of each, a verdict on the step time, and the findings that
were fixed, are new, or remain (matched by rule id).

``render_text`` prints it for a terminal; the command ``tfadvisor diff`` is in
:mod:`tfadvisor.cli.diff`.

The verdict is on the mean step time, or on the time per example when the two runs' batch sizes
differ and both are known. Two figures of the whole run can take it over (``verdict_on``): where both captures have
the Keras callback's unprofiled clock (``unprofiled_ms_per_step``: wall time per training step outside the profiled
window, evaluation and epoch ends included), the verdict is on it; else where throughput (wall time per training step
over the window, evaluation, epoch ends and checkpoints included) moved by more than :data:`WHOLE_NOISE_PCT` and step
time says otherwise, on throughput. Both are shown either way, and the text says which moved.

A change of step time is reported as "unchanged" when it is within :data:`NOISE_PCT` (1 %), or when the profiled
steps cannot tell it from run-to-run noise: the 95 % interval of the difference of the mean step times (Welch, from
each step's ``ms_per_step``; the steps that hold occasional work, such as a checkpoint every 4th step, are their own
stratum) contains zero. Two captures of the same program on a busy host differ by a few % and must not read as a
speed-up or a regression.

The two captures' conditions are compared too (:func:`conditions`): other processes' CPU share, cores, batch size,
``steps_per_execution``, TensorFlow version. When the load or the machine differ, the verdict says it cannot be
trusted as a measure of the change alone.
"""

from __future__ import annotations

import math
from typing import Any

from tfadvisor._version import schema_fields
from tfadvisor.analyses.variation import held_steps
from tfadvisor.report import get, run_label
from tfadvisor.report.findings import finding_rule

NOISE_PCT = 1.0
#: A whole-run figure (throughput, the unprofiled clock) within this of its before is "unchanged": it has no per-step
#: noise interval, and a window holding one epoch end more or less moves it by a few %.
WHOLE_NOISE_PCT = 5.0


def _t95(df: float) -> float:
    """Two-sided 95 % quantile of Student's t (Cornish-Fisher expansion; within 1 % for df >= 3)."""
    z = 1.959964
    df = max(df, 1.0)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _periodic_steps(result: Any) -> set[int]:
    """The step numbers that hold a run's periodic work (its largest pattern of two steps or more)."""
    tables = getattr(result, "tables", None) or {}
    return next((r for r in held_steps(tables.get("step_patterns")) if len(r) >= 2), set())


def _step_strata(result: Any, held: set[int] | None = None) -> list[list[float]]:
    """Per-training-step times of the steps the step statistics use (``ms_per_step``, ``in_stats``), in
    strata: the steps that hold the run's occasional work (its largest ``step_patterns`` row of two
    steps or more: a checkpoint every 4th step) and the others. Those steps are slower by design, not
    by chance: the mean's noise is each stratum's own (stratified), not the spread between them. One
    stratum without such work, or when a stratum would have fewer than two steps. ``held``: the step
    numbers to split at (default: the run's own periodic work)."""
    tables = getattr(result, "tables", None) or {}
    table = tables.get("steps")
    if table is None or len(table) == 0 or "ms_per_step" not in table:
        return []
    if "in_stats" in table:
        table = table[table["in_stats"].astype(bool)]
    times = [float(v) for v in table["ms_per_step"].tolist()]
    numbers = [int(v) for v in table["step"].tolist()] if "step" in table else []
    held = (held if held is not None else _periodic_steps(result)) if numbers else set()
    inside = [t for t, n in zip(times, numbers) if n in held and t == t]
    outside = [t for t, n in zip(times, numbers) if n not in held and t == t] if numbers else \
        [t for t in times if t == t]
    if len(inside) >= 2 and len(outside) >= 2:
        return [inside, outside]
    return [inside + outside] if inside else [outside]


def _mean_and_parts(strata: list[list[float]]) -> tuple[float, list[tuple[float, int]]]:
    """The mean over all steps and, per stratum, (its share of the mean's variance, degrees of freedom)."""
    n = sum(len(s) for s in strata)
    mean = sum(sum(s) for s in strata) / n
    parts = []
    for s in strata:
        m = sum(s) / len(s)
        var = sum((x - m) ** 2 for x in s) / (len(s) - 1)
        parts.append(((len(s) / n) ** 2 * var / len(s), len(s) - 1))
    return mean, parts


def noise_interval_pct(before: Any, after: Any) -> tuple[float, float] | None:
    """95 % interval of the change of the mean step time, in % of before (Welch-Satterthwaite over each
    side's strata, :func:`_step_strata`); None with < 2 steps a side."""
    # each side's steps that hold periodic work are a stratum; a side without such work is split at the other
    # side's (the same step numbers: the fix removed the work, not what else those steps do, an epoch's start)
    hb, ha = _periodic_steps(before), _periodic_steps(after)
    return _welch_pct(_step_strata(before, hb or ha), _step_strata(after, ha or hb))


def _welch_pct(a: list[list[float]], b: list[list[float]]) -> tuple[float, float] | None:
    """95 % interval of the change of the mean from strata ``a`` to strata ``b``, in % of a's mean."""
    if sum(len(s) for s in a) < 2 or sum(len(s) for s in b) < 2:
        return None
    ma, pa = _mean_and_parts(a)
    mb, pb = _mean_and_parts(b)
    parts = pa + pb
    v = sum(x for x, _ in parts)
    se = math.sqrt(v)
    if ma <= 0:
        return None
    if se == 0:
        return ((mb - ma) / ma * 100,) * 2
    df = v ** 2 / sum(x ** 2 / d for x, d in parts if x)
    half = _t95(df) * se
    return ((mb - ma - half) / ma * 100, (mb - ma + half) / ma * 100)

def clock_strata(result: Any) -> list[list[float]]:
    """The run file's unprofiled clock outside the window (``tfadvisor_run.json`` ``clock``, before and after): ms per
    training step of each interval, in strata by what came after it (nothing, validation, an epoch end: the latter
    come on a schedule, not by chance); a stratum of fewer than two joins the plain one."""
    from tfadvisor.io.runmeta import clock_facts

    clock, _ = clock_facts(_facts(result))
    by: dict[str, list[float]] = {}
    for side in ("before", "after"):
        c = clock.get(side)
        for ms, n, kind in zip(*(c[k] for k in ("ms", "steps", "kind"))) if c else ():
            by.setdefault(kind, []).append(ms / n)
    plain = by.pop("", [])
    out = []
    for v in by.values():
        (out.append(v) if len(v) >= 2 else plain.extend(v))
    return ([plain] if plain else []) + out


#: (metric, label, section, better): better is "lower", "higher" or "" (neither).
FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("step_time_mean_ms", "mean", "Step time", "lower"),
    ("step_time_median_ms", "median", "Step time", "lower"),
    ("step_time_p90_ms", "p90", "Step time", "lower"),
    ("step_time_max_ms", "max", "Step time", "lower"),
    ("throughput_ms_per_step", "throughput (evaluation included)", "Step time", "lower"),
    ("unprofiled_ms_per_step", "unprofiled clock (outside window)", "Step time", "lower"),
    ("profiler_inflation", "profiler inflation", "Step time", ""),
    ("outside_eval_ms_per_step", "evaluation per step", "Step time", "lower"),
    ("steps_count", "steps profiled", "Step time", ""),
    ("step_busy_mean_ms", "busy part (inside the step marker)", "Step time", ""),
    ("step_device_compute_pct", "device compute", "Breakdown (% of step)", ""),
    ("step_input_pct", "input", "Breakdown (% of step)", "lower"),
    ("step_host_compute_pct", "host compute", "Breakdown (% of step)", ""),
    ("step_kernel_launch_pct", "kernel launch", "Breakdown (% of step)", "lower"),
    ("step_collective_pct", "collectives", "Breakdown (% of step)", "lower"),
    ("step_between_steps_pct", "between steps", "Breakdown (% of step)", "lower"),
    ("step_idle_pct", "idle", "Breakdown (% of step)", "lower"),
    ("step_other_pct", "other", "Breakdown (% of step)", ""),
    ("input_pct", "waiting for input", "Input", "lower"),
    ("tfdata_cpu_ratio", "tf.data CPU / training CPU", "Input", ""),
    ("idle_pct", "idle", "Idle and gaps", "lower"),
    ("gaps_count", "gaps", "Idle and gaps", "lower"),
    ("gap_max_ms", "longest gap", "Idle and gaps", "lower"),
    ("eager_pct", "eager execution", "Host overhead", "lower"),
    ("python_overhead_pct", "Python overhead", "Host overhead", "lower"),
    ("retrace_count", "retraces", "Host overhead", "lower"),
    ("low_precision_pct", "16-bit compute", "Precision", "higher"),
    ("fp32_pct", "fp32 compute", "Precision", "lower"),
    ("memory_peak_bytes", "peak in use", "Memory", ""),
    ("memory_peak_pct", "peak / capacity", "Memory", ""),
    ("allreduce_ms_per_step", "AllReduce per step", "AllReduce", "lower"),
    ("allreduce_pct", "AllReduce % of step", "AllReduce", "lower"),
    ("allreduce_ratio", "measured / expected", "AllReduce", "lower"),
    # from the system samples and start-up record (tfadvisor/analyses/system.py); absent in older captures
    ("system_cpu_util_pct", "CPU busy (all cores)", "System", ""),
    ("system_proc_cpu_pct", "training process CPU", "System", ""),
    ("system_other_cpu_pct", "other processes' CPU", "System", ""),
    ("system_gpu_util_pct", "GPU busy", "System", "higher"),
    ("system_gpu_mem_used_pct", "GPU memory peak", "System", ""),
    ("system_mem_used_pct", "host memory peak", "System", ""),
    ("system_swap_io_mbps", "swap I/O (MB/s)", "System", "lower"),
    ("system_disk_read_mbps", "disk read (MB/s)", "System", ""),
    ("system_disk_busy_pct", "disk busy", "System", ""),
    ("system_net_recv_mbps", "network receive (MB/s)", "System", ""),
    ("startup_to_first_step_s", "start-up to first step (s)", "Start-up", "lower"),
    ("startup_before_fit_s", "before fit() (s)", "Start-up", "lower"),
    ("startup_first_step_s", "first step (s)", "Start-up", "lower"),
)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return None if math.isnan(f) else f
    return None


def _unit(result: Any, name: str) -> str:
    return (getattr(getattr(result, "metrics", None), "units", None) or {}).get(name, "")


def _change(b: float | None, a: float | None) -> tuple[float | None, float | None]:
    if b is None or a is None:
        return None, None
    delta = a - b
    pct = (delta / b * 100) if b != 0 else (0.0 if a == 0 else None)
    return delta, pct


def _judge(delta: float | None, pct: float | None, better: str) -> str:
    """better / worse / same / '' (no direction or no data)."""
    if delta is None or not better:
        return ""
    if (pct is not None and abs(pct) < NOISE_PCT) or delta == 0:
        return "same"
    lower = delta < 0
    return "better" if lower == (better == "lower") else "worse"


#: The diff's section of the attribution: each part's ms per training step, before and after.
PARTS_SECTION = "Where the time goes (ms per step)"


def _parts(mb: Any, ma: Any) -> list[dict]:
    """Each attribution part as ms per training step on both sides (its share of the steps' wall time times the
    wall clock per step): what got faster and where time moved. Parts under 1 % on both sides are left out."""
    from tfadvisor.report.attribution import LABELS

    wb, wa = _num(mb.get("step_time_mean_ms")), _num(ma.get("step_time_mean_ms"))
    if wb is None or wa is None:
        return []
    out = []
    for part, label in LABELS.items():
        pb, pa = _num(mb.get(f"attr_{part}_pct")), _num(ma.get(f"attr_{part}_pct"))
        if pb is None or pa is None or max(pb, pa) < 1.0 or part == "outside_steps":
            continue
        vb, va = pb * wb / 100.0, pa * wa / 100.0
        delta, pct = _change(vb, va)
        out.append(dict(metric=f"attr_{part}_ms_per_step", label=label, section=PARTS_SECTION, unit="ms",
                        before=vb, after=va, change=delta, change_pct=pct, better="lower",
                        judgement=_judge(delta, pct, "lower") or None))
    return out


def diff_results(before: Any, after: Any) -> dict:
    """The two results side by side: figures with changes, the verdict, findings fixed/new/remaining (every rule
    that fired: a finding's own, and those folded into it as ``also``)."""
    mb = getattr(before, "metrics", None) or {}
    ma = getattr(after, "metrics", None) or {}
    figures = []
    for name, label, section, better in FIGURES:
        vb, va = mb.get(name), ma.get(name)
        if vb is None and va is None:
            continue
        delta, pct = _change(_num(vb), _num(va))
        figures.append(dict(metric=name, label=label, section=section, unit=_unit(before, name) or _unit(after, name),
                            before=vb, after=va, change=delta, change_pct=pct, better=better or None,
                            judgement=_judge(delta, pct, better) or None))
    figures += _parts(mb, ma)
    sb, sa = _num(mb.get("step_time_mean_ms")), _num(ma.get("step_time_mean_ms"))
    step = dict(before_ms=sb, after_ms=sa, change_ms=None, change_pct=None, speedup=None, verdict="unknown")
    cond = conditions(before, after)
    bb, ba = cond["batch_size"]
    if sb is not None and sa is not None and sb > 0 and sa > 0:
        if bb and ba:
            step.update(before_examples_per_s=bb / (sb / 1000), after_examples_per_s=ba / (sa / 1000))
        # per-step time compares only at one batch size: else the time per example does
        nb, na = (sb / bb, sa / ba) if bb and ba and bb != ba else (sb, sa)
        change_pct = (na - nb) / nb * 100
        step.update(change_ms=sa - sb, change_pct=change_pct, speedup=nb / na,
                    per="example" if (bb and ba and bb != ba) else "step")
        ci = noise_interval_pct(before, after) if step["per"] == "step" else None
        step["interval_pct"] = list(ci) if ci else None
        if abs(change_pct) < NOISE_PCT:
            step["verdict"] = "unchanged"
            text = f"unchanged: step time within {NOISE_PCT:g} % ({_pct(change_pct)})"
        elif ci is not None and ci[0] < 0 < ci[1]:
            step["verdict"] = "unchanged"
            text = (f"about equal: {_pct(change_pct)} per step ({sb:.3g} ms -> {sa:.3g} ms) is within the "
                    f"steps' run-to-run noise (95 % interval {ci[0]:+.1f} .. {ci[1]:+.1f} %)")
        elif change_pct < 0:
            step["verdict"] = "faster"
            text = (f"faster by {abs(change_pct):.1f} % per {step['per']} ({sb:.3g} ms -> {sa:.3g} ms per step, "
                    f"{step['speedup']:.2f}x)")
        else:
            step["verdict"] = "slower"
            text = f"slower by {change_pct:.1f} % per {step['per']} ({sb:.3g} ms -> {sa:.3g} ms per step)"
        if step["per"] == "example":
            text += f"; batch size {bb} -> {ba}: judged per example"
    else:
        missing = [w for w, v in (("before", sb), ("after", sa)) if v is None or v <= 0]
        text = f"no verdict: no step time in the {' and '.join(missing)} profile"
    if cond["differ"]:
        text += (f"; but the captures' conditions differ ({'; '.join(cond['differ'])}): not a measure of the change "
                 "alone")
    step["text"] = text
    verdict_on, verdict, vtext, vchange, vspeed = "step_time", step["verdict"], text, step["change_pct"], \
        step["speedup"]
    whole = {}
    for key, metric in (("throughput", "throughput_ms_per_step"), ("unprofiled", "unprofiled_ms_per_step")):
        w = _whole(_num(mb.get(metric)), _num(ma.get(metric)))
        if w is not None:
            whole[key] = w
    u, t = whole.get("unprofiled"), whole.get("throughput")
    if u is not None:
        ci = _welch_pct(clock_strata(before), clock_strata(after))
        u["interval_pct"] = list(ci) if ci else None
        if ci is not None and ci[0] < 0 < ci[1]:  # the clock's intervals cannot tell the change from noise
            u["verdict"] = "unchanged"
        verdict_on, verdict, vchange, vspeed = "unprofiled", u["verdict"], u["change_pct"], u["speedup"]
        vtext = (f"{_said(u)} per training step by the unprofiled clock outside the profiled windows (evaluation and "
                 f"epoch ends included: {u['before_ms']:.3g} ms -> {u['after_ms']:.3g} ms); profiled: step time "
                 f"{_moved(step)}" + (f", throughput {_moved(t)}" if t else ""))
    elif t is not None and t["verdict"] in ("faster", "slower") and t["verdict"] != step["verdict"]:
        verdict_on, verdict, vchange, vspeed = "throughput", t["verdict"], t["change_pct"], t["speedup"]
        vtext = (f"{_said(t)} per training step over the window, evaluation and epoch ends included "
                 f"({t['before_ms']:.3g} ms -> {t['after_ms']:.3g} ms): throughput moved, while step time alone "
                 f"{_moved(step)}")
    if verdict_on != "step_time" and cond["differ"]:
        vtext += (f"; but the captures' conditions differ ({'; '.join(cond['differ'])}): not a measure of the change "
                  "alone")

    fb, fa = _fired(before), _fired(after)

    def brief(f: Any) -> dict:
        return dict(rule=finding_rule(f), severity=get(f, "severity"), title=get(f, "title"),
                    impact_pct=get(f, "impact_pct"))

    findings = dict(
        fixed=[brief(f) for r, f in fb.items() if r not in fa],
        new=[brief(f) for r, f in fa.items() if r not in fb],
        remaining=[dict(brief(fa[r]), impact_before_pct=get(fb[r], "impact_pct")) for r in fb if r in fa],
    )
    return dict(
        **schema_fields(),
        before=dict(run=run_label(before), directory=getattr(getattr(before, "run", None), "directory", None),
                    hosts=len(getattr(before, "hosts", None) or []) or None),
        after=dict(run=run_label(after), directory=getattr(getattr(after, "run", None), "directory", None),
                   hosts=len(getattr(after, "hosts", None) or []) or None),
        step_time=step,
        throughput=whole.get("throughput"),
        unprofiled=whole.get("unprofiled"),
        verdict=verdict,
        verdict_on=verdict_on,
        verdict_change_pct=vchange,
        verdict_speedup=vspeed,
        verdict_text=vtext,
        conditions=cond,
        figures=figures,
        findings=findings,
    )


def _whole(b: float | None, a: float | None) -> dict | None:
    """A whole-run figure's change (ms per training step, lower is better) with its own verdict."""
    if b is None or a is None or b <= 0 or a <= 0:
        return None
    pct = (a - b) / b * 100
    verdict = "unchanged" if abs(pct) < WHOLE_NOISE_PCT else ("faster" if pct < 0 else "slower")
    return dict(before_ms=b, after_ms=a, change_ms=a - b, change_pct=pct, speedup=b / a, verdict=verdict)


def _said(w: dict) -> str:
    """``faster by 84.0 % (6.15x)`` of a whole-run figure."""
    if w["verdict"] == "unchanged":
        ci = w.get("interval_pct")
        if ci and abs(w["change_pct"]) >= WHOLE_NOISE_PCT:
            return (f"about equal: {_pct(w['change_pct'])} is within the noise (95 % interval {ci[0]:+.1f} .. "
                    f"{ci[1]:+.1f} %)")
        return f"unchanged: within {WHOLE_NOISE_PCT:g} % ({_pct(w['change_pct'])})"
    if w["verdict"] == "faster":
        return f"faster by {abs(w['change_pct']):.1f} % ({w['speedup']:.2f}x)"
    return f"slower by {w['change_pct']:.1f} %"


def _moved(w: dict | None) -> str:
    """How a figure moved, in a few words: ``47.5 -> 62.8 ms (slower, +32 %)``."""
    if not w or w.get("before_ms") is None or w.get("after_ms") is None:
        return "unknown"
    v = w.get("verdict") or "unknown"
    return f"{w['before_ms']:.3g} -> {w['after_ms']:.3g} ms ({v}, {_pct(w.get('change_pct'))})"


#: Other processes' CPU (% of all cores) that two captures may differ by before their verdict is distrusted.
OTHER_CPU_POINTS = 15.0


def _facts(result: Any) -> dict[str, Any]:
    """The run file of a result's run (``tfadvisor_run.json``), {} when there is none or it cannot be read."""
    run = getattr(result, "run", None)
    directory = getattr(run, "directory", None)
    if not directory:
        return {}
    from tfadvisor.io.reader import read_run_metadata

    try:
        return read_run_metadata(directory)
    except Exception:  # noqa: BLE001 - a run file is context, never a reason to fail a comparison
        return {}


def conditions(before: Any, after: Any) -> dict[str, Any]:
    """What each capture ran under, side by side, and what differs enough to distrust a verdict.

    ``items``: ``{name, before, after, differs}`` for other processes' CPU, the training process's CPU,
    cores, batch size, ``steps_per_execution`` and the TensorFlow version; ``differ``: the reasons
    (other processes' CPU apart by :data:`OTHER_CPU_POINTS` points or more, other cores, another TF
    version); ``batch_size``: (before, after) or None each.
    """
    mb = getattr(before, "metrics", None) or {}
    ma = getattr(after, "metrics", None) or {}
    fb, fa = _facts(before), _facts(after)

    def batch(result: Any, facts: dict) -> int | None:
        v = getattr(getattr(result, "options", None), "batch_size", None) or facts.get("batch_size")
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    items, differ = [], []

    def add(name: str, b: Any, a: Any, differs: bool, why: str = "") -> None:
        items.append({"name": name, "before": b, "after": a, "differs": bool(differs)})
        if differs and why:
            differ.append(why)

    ob, oa = _num(mb.get("system_other_cpu_pct")), _num(ma.get("system_other_cpu_pct"))
    add("other processes' CPU %", ob, oa, ob is not None and oa is not None and abs(ob - oa) >= OTHER_CPU_POINTS,
        f"other processes took {ob or 0:.0f} % of the CPU before, {oa or 0:.0f} % after")
    add("training process CPU %", _num(mb.get("system_proc_cpu_pct")), _num(ma.get("system_proc_cpu_pct")), False)
    cb, ca = _num(mb.get("system_cpu_cores")), _num(ma.get("system_cpu_cores"))
    add("CPU cores", cb, ca, cb is not None and ca is not None and cb != ca,
        f"{cb or 0:.0f} cores before, {ca or 0:.0f} after")
    bb, ba = batch(before, fb), batch(after, fa)
    add("batch size", bb, ba, bool(bb and ba and bb != ba))
    sb, sa = _num(mb.get("steps_per_execution")), _num(ma.get("steps_per_execution"))
    add("steps_per_execution", sb, sa, sb is not None and sa is not None and sb != sa)
    tb, ta = fb.get("tf_version"), fa.get("tf_version")
    tb, ta = (tb if isinstance(tb, str) else None), (ta if isinstance(ta, str) else None)
    add("TensorFlow version", tb, ta, bool(tb and ta and tb != ta), f"TensorFlow {tb} before, {ta} after")
    return {"items": items, "differ": differ, "comparable": not differ, "batch_size": [bb, ba]}


def _cond(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 10 else f"{v:.3g}"
    return "?" if v is None else str(v)


def _pct(p: float | None) -> str:
    return "" if p is None else f"{p:+.1f} %"


def _fmt(v: Any, unit: str, name: str) -> str:
    from tfadvisor.report.formatting import fmt_value

    return fmt_value(v, unit, name)


def _change_text(fig: dict) -> str:
    if fig["change"] is None:
        if fig["before"] != fig["after"]:
            return "changed" if fig["before"] is not None and fig["after"] is not None else (
                "new" if fig["before"] is None else "gone")
        return ""
    name, unit = fig["metric"], fig["unit"]
    if fig["change"] == 0:
        return "="
    if name.endswith("_pct") or unit in ("%", "pct"):
        s = f"{fig['change']:+.1f} pts"
    elif fig["change_pct"] is not None:
        s = _pct(fig["change_pct"])
    else:
        s = f"{fig['change']:+.3g}"
    return s


def render_text(d: dict, console: Any = None) -> None:
    """Print the comparison with rich: a verdict line, a figures table, the findings lists."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con = console or Console(width=min(100, max(60, Console().width)))
    colour = {"faster": "green", "slower": "red"}.get(d["verdict"], "yellow")
    for key in ("before", "after"):
        side = d[key]
        con.print(Text(f"{key + ':':8}", style="dim") + Text(str(side.get("directory") or side["run"])))
    con.print(Text("Verdict: ", style="bold") + Text(d["verdict_text"], style=f"bold {colour}"))
    known = [c for c in d.get("conditions", {}).get("items", []) if c["before"] is not None or c["after"] is not None]
    if known:
        con.print(Text("Conditions: ", style="bold") + Text("; ".join(
            f"{c['name']} {_cond(c['before'])} -> {_cond(c['after'])}" + (" (differs)" if c["differs"] else "")
            for c in known)))
    table = Table(show_header=True, header_style="bold", show_lines=False, pad_edge=False, expand=False)
    table.add_column("figure", overflow="fold")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("change", justify="right")
    section = None
    for fig in d["figures"]:
        if fig["section"] != section:
            if section is not None:
                table.add_section()
            section = fig["section"]
            table.add_row(Text(section, style="bold cyan"), "", "", "")
        style = {"better": "green", "worse": "red"}.get(fig["judgement"] or "", "")
        table.add_row(Text("  " + fig["label"]), Text(_fmt(fig["before"], fig["unit"], fig["metric"])),
                      Text(_fmt(fig["after"], fig["unit"], fig["metric"])), Text(_change_text(fig), style=style))
    con.print(table)
    f = d["findings"]
    for key, label, style, mark in (("fixed", "Fixed", "green", "-"), ("new", "New", "red", "+"),
                                    ("remaining", "Remaining", "yellow", "=")):
        items = f[key]
        con.print(Text(f"{label} findings ({len(items)})" + ("" if items else ": none"), style=f"bold {style}"))
        for i in items:
            line = Text(f"  {mark} ", style=style)
            line.append(i["rule"], style="bold")
            line.append(f" [{i.get('severity') or '?'}] {i.get('title') or ''}")
            con.print(line)




def _fired(result: Any) -> dict[str, Any]:
    """Every rule that fired, by id: each finding, and the explanations folded into it (``also``, same keys)."""
    out: dict[str, Any] = {}
    for f in getattr(result, "findings", None) or []:
        out.setdefault(finding_rule(f), f)
        for a in get(f, "also", None) or []:
            if isinstance(a, dict):
                out.setdefault(str(a.get("rule", "")), a)
    return out
