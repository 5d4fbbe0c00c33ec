"""The metrics of a run with several host files, declared (computed by :mod:`tfadvisor.multihost.analysis`).

A leaf: the metric registry reads these declarations without importing the multi-host executor.
"""

from __future__ import annotations

from tfadvisor.analyses.base import declare

#: A host whose work per step exceeds the median host's by this factor is a straggler.
STRAGGLER_RATIO = 1.2
#: A host stands out on a figure that differs from the hosts' median by more than this share of it
#: and more than this many robust deviations (1.4826 x the median absolute deviation).
STAND_OUT_REL = 0.10
STAND_OUT_MADS = 3.5

DECLARED = declare(
    "multihost",
    ("hosts_count", "count", "host files analysed"),
    ("median_host", "", "the host whose per-step figures are the run's (median work per step) (whose per-step "
                        "figures the run-level metrics are, and the reference of the ratios: the lower median by work "
                        "per step)"),
    ("hosts_expected", "count", "hosts the run should have (tfadvisor_run.json hosts / host_names)"),
    ("missing_hosts", "", "expected hosts with no profile file"),
    ("missing_hosts_count", "count", "expected hosts with no profile file"),
    ("common_steps", "count", "step numbers present on every host with steps"),
    ("hosts_misaligned", "", "hosts whose step numbers do not line up with the others' (aligned by step number)"),
    ("hosts_misaligned_count", "count", "hosts whose step numbers do not line up"),
    ("straggler_host", "", "host whose compute + input per step is > 1.2x the median host's while the others wait "
                           "longer in AllReduce"),
    ("straggler_ratio", "x", "work (compute + input) per step of the slowest host / the median host (work per step "
                             "of the slowest host / the median host; None when over 1.2 but not confirmed by AllReduce "
                             "waits)"),
    ("slowest_host", "", "host with the most work (compute + input) per step"),
    ("slowest_host_ratio", "x", "its work per step / the median host's (the same without the AllReduce check)"),
    ("load_imbalance_pct", "%", "(max - min) / the median host's compute time per step"),
    ("slowest_host_excess_pct", "%", "the slowest host's work per step beyond the median host's, % of the median "
                                     "host's step time: what the run gains per step if it worked like the median host"),
    ("straggler_wait_ms", "ms", "what the straggler costs each other host per step: the other hosts' median wait "
                                "(collectives + idle) per step beyond the straggler's own"),
    ("straggler_wait_pct", "%", "the same, % of the median host's step time"),
    ("device_straggler_host", "", "the host of the run's device straggler (the one whose slow device is slowest "
                                  "against its host's median device); the run's `device_*` metrics are that host's"),
    ("hosts_standing_out_count", "count", "hosts the `hosts` table's `stands_out` column names, with why: the "
                                          "straggler, hosts without steps or out of step, and hosts whose step time, "
                                          "work, input, wait or memory peak is off the hosts' median by more than "
                                          f"{int(100 * STAND_OUT_REL)} % and {STAND_OUT_MADS:g} robust deviations"),
    doc="Not in `ORDER`: combines the hosts of a run with several host files, `tfadvisor/multihost/analysis.py`; "
        "the run's other metrics are the median host's, by work per step.",
    tables="`hosts` (host, steps, steps_used, step_time_mean_ms, step_time_median_ms, step_time_used_ms, one "
           "`<category>_ms` column per step category, compute_ms, work_ms, wait_ms, input_pct, allreduce_ms_per_step, "
           "memory_peak_bytes, events, file_bytes, work_ratio, device_straggler, device_straggler_ratio, stands_out: "
           "why the host stands out, empty when it does not), `hosts_steps` (host, step, train_steps: the "
           "training steps the step marker holds (steps_per_execution), duration_ms and `<category>_ms`: the marker's, "
           "aligned by step number), "
           "`hosts_distribution` (figure, column, unit, hosts, median, p10, p90, min, max, spread_pct = (max - min) / "
           "median: one row per per-host figure)",
)

__all__ = ["DECLARED", "STAND_OUT_MADS", "STAND_OUT_REL", "STRAGGLER_RATIO"]
