"""The scaling view (``tfadvisor scaling RUN_A RUN_B ...``, :func:`scaling_report`): runs of the same
model at different replica counts compared: throughput per replica and scaling efficiency
``throughput_N / (N / N0 x throughput_N0)``, with the efficiency lost split into AllReduce,
input and other from the differences of the per-step category times. Multi-host runs are analysed
through :func:`tfadvisor.multihost.analysis.analyze_hosts`; the table is drawn by
:func:`tfadvisor.report.scaling.render_scaling`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfadvisor._version import schema_fields
from tfadvisor.analyses import Options
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import resolve
from tfadvisor.io.reader import read_run_metadata
from tfadvisor.io.runmeta import positive as _positive
from tfadvisor.multihost.analysis import CATEGORIES, analyze_run
from tfadvisor.units import finite_number


def _analyze_for_scaling(path: str, options: Options | None, jobs: int | None, dask: str | None):
    """Metrics of one run (no rules needed), through the one path every analysis takes."""
    chosen = resolve(path)
    opts = dataclasses.replace(options) if options is not None else None
    return chosen, analyze_run(chosen, options=opts, jobs=jobs, dask=dask)


def _int_list(text: str | None, flag: str, n: int) -> list[int] | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        vals = [int(x) for x in str(text).replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise TraceError(flag, f"expected comma-separated whole numbers, got {text!r}") from None
    if any(v <= 0 for v in vals):
        raise TraceError(flag, f"values must be positive, got {text!r}")
    if len(vals) == 1 and flag == "--batch-size":
        return vals * n
    if len(vals) != n:
        raise TraceError(flag, f"give one value per run ({n} runs), got {len(vals)}")
    return vals


def scaling_report(
    runs: list[str],
    replicas: list[int] | str | None = None,
    batch_sizes: list[int] | str | None = None,
    *,
    options: Options | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    results: list | None = None,
) -> dict[str, Any]:
    """Throughput per replica and scaling efficiency of runs of one model at different replica counts.

    ``replicas`` / ``batch_sizes``: one per run (``batch_sizes`` may be one value for all), as
    lists or ``"2,4"`` strings; else each run's ``tfadvisor_run.json`` (``replicas``,
    ``batch_size`` = the global batch). ``results``: already-analysed ``Result`` objects, one per
    run (skips the analysis). The baseline is the run with the fewest replicas.
    """
    runs = [str(r) for r in runs]
    if len(runs) < 2:
        raise TraceError(runs[0] if runs else "(no runs)", "the scaling view needs two or more runs")
    reps = replicas if isinstance(replicas, list) or replicas is None else _int_list(replicas, "--replicas", len(runs))
    bats = batch_sizes if isinstance(batch_sizes, list) or batch_sizes is None else \
        _int_list(batch_sizes, "--batch-size", len(runs))
    if reps is not None and len(reps) != len(runs):
        raise TraceError("--replicas", f"give one value per run ({len(runs)} runs), got {len(reps)}")
    if bats is not None and len(bats) == 1:
        bats = bats * len(runs)
    if bats is not None and len(bats) != len(runs):
        raise TraceError("--batch-size", f"give one value or one per run ({len(runs)} runs), got {len(bats)}")

    rows = []
    for i, path in enumerate(runs):
        if results is not None:
            res = results[i]
            chosen = res.run
        else:
            chosen, res = _analyze_for_scaling(path, options, jobs, dask)
        md = read_run_metadata(chosen.directory)
        n = reps[i] if reps is not None else _meta_int(md, "replicas")
        if n is None:
            raise TraceError(path, "replica count unknown: add \"replicas\" to tfadvisor_run.json or pass "
                                   "--replicas a,b (one per run)")
        b = bats[i] if bats is not None else _meta_int(md, "batch_size")
        if b is None:
            raise TraceError(path, "global batch size unknown: add \"batch_size\" to tfadvisor_run.json or pass "
                                   "--batch-size N (or one per run)")
        m = res.metrics
        t = finite_number(m.get("step_time_mean_ms"))
        if t is None or t <= 0:
            raise TraceError(path, "no steps found: cannot compute throughput")
        cat = {c: t * (finite_number(m.get(f"step_{c}_pct")) or 0.0) / 100.0 for c in CATEGORIES}
        rows.append({
            "run": path,
            "run_dir": chosen.directory,
            "hosts": len(chosen.files),
            "replicas": int(n),
            "global_batch": int(b),
            "per_replica_batch": b / n,
            "step_time_ms": t,
            "allreduce_ms_per_step": cat["collective"],
            "input_ms_per_step": cat["input"],
            "other_ms_per_step": t - cat["collective"] - cat["input"],
            "examples_per_s": b / (t / 1000.0),
            "examples_per_s_per_replica": b / (t / 1000.0) / n,
        })
    base = min(range(len(rows)), key=lambda j: (rows[j]["replicas"], j))
    b0 = rows[base]
    for r in rows:
        scale = r["per_replica_batch"] / b0["per_replica_batch"]  # ideal step time ratio
        ideal = b0["step_time_ms"] * scale
        eff = r["examples_per_s"] / (r["replicas"] / b0["replicas"] * b0["examples_per_s"])
        loss_ms = r["step_time_ms"] - ideal
        d_ar = r["allreduce_ms_per_step"] - b0["allreduce_ms_per_step"] * scale
        d_in = r["input_ms_per_step"] - b0["input_ms_per_step"] * scale
        d_other = loss_ms - d_ar - d_in
        t = r["step_time_ms"]
        r.update({
            "baseline": r is b0,
            "ideal_step_time_ms": ideal,
            "scaling_efficiency_pct": 100.0 * eff,
            "loss_ms_per_step": loss_ms,
            "loss_ms": {"allreduce": d_ar, "input": d_in, "other": d_other},
            # points of efficiency lost: they add up to 100 - scaling_efficiency_pct
            "loss_pct": {"allreduce": 100.0 * d_ar / t, "input": 100.0 * d_in / t, "other": 100.0 * d_other / t},
        })
    return {
        **schema_fields(),
        "baseline": b0["run"],
        "baseline_replicas": b0["replicas"],
        "definition": "efficiency = throughput_N / (N / N0 x throughput_N0); loss_pct splits 100 - efficiency "
                      "into AllReduce, input and other from per-step category times vs the baseline scaled "
                      "to the same per-replica batch",
        "runs": rows,
    }


def _meta_int(md: dict, key: str) -> int | None:
    """A positive integer from the run metadata, else None (strings, NaN, 1e400 and the like)."""
    return _positive(md.get(key), True)


__all__ = ["scaling_report"]
