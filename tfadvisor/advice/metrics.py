"""The metric names rules may use, by the module that produces them.

A rule that names anything else is rejected when it is loaded (a typo would otherwise
make a rule silently never fire). The known names are the list below (what the built-in
rules rely on; a test checks each is documented in ``tfadvisor/analyses/README.md`` or
produced by its module) plus every name the README's table documents, read at import.
"""

from __future__ import annotations

import re
from pathlib import Path

METRICS_BY_SOURCE: dict[str, tuple[str, ...]] = {
    "steps": (
        "steps_count", "steps_source", "step_time_mean_ms", "step_time_median_ms", "step_time_p90_ms",
        "step_time_min_ms", "step_time_max_ms", "step_time_std_ms", "step_outliers_count", "step_outlier_max_ratio",
        "profile_wall_ms", "steps_wall_pct", "step_device_compute_pct", "step_input_pct", "step_host_compute_pct",
        "step_kernel_launch_pct", "step_collective_pct", "step_idle_pct", "step_other_pct", "step_period_mean_ms",
        "steps_in_stats_count",
    ),
    "gaps": (
        "idle_pct", "idle_between_steps_pct", "idle_within_steps_pct", "gaps_count", "gap_mean_ms", "gap_max_ms",
        "gap_host_activity", "gap_host_python_pct",
    ),
    "input": (
        "input_pct", "input_host_wait_pct", "input_h2d_pct", "input_device_wait_pct", "xprof_input_pct",
        "input_severity", "tfdata_cpu_ratio", "tfdata_cpu_pct", "h2d_pageable_pct", "h2d_exposed_pct",
        "tfdata_contention_pct", "tfdata_contention_ms_per_step", "tfdata_cost_ms_per_step", "tfdata_cost_pct",
        "step_own_ms_per_step", "tfdata_cores",
    ),
    "tfdata": (
        "tfdata_present", "tfdata_has_prefetch", "tfdata_has_cache", "tfdata_sequential_map", "tfdata_map_element_us",
        "tfdata_expensive_map", "tfdata_repeated_source_no_cache", "tfdata_pipeline", "tfdata_work_ms",
        "tfdata_work_ms_per_step", "tfdata_work_pct", "tfdata_hot_stage", "tfdata_hot_stage_ms",
        "tfdata_sequential_map_pct", "tfdata_sequential_map_ms_per_step", "tfdata_map_random", "tfdata_map_stage",
        "tfdata_map_batch_ms", "tfdata_map_ms", "tfdata_map_ms_per_step", "tfdata_map_pct", "tfdata_vectorizable_map",
        "tfdata_vectorizable_map_pct", "tfdata_repeat_before_map", "tfdata_recompute_pct",
        "tfdata_recompute_ms_per_step", "tfdata_generator", "tfdata_generator_pct", "tfdata_generator_ms_per_step",
        "tfdata_generator_element_us", "tfdata_pyfunc_pct", "tfdata_pyfunc_element_us", "tfdata_files_opened",
        "tfdata_files_per_step", "tfdata_read_pct", "tfdata_read_ms_per_step", "tfdata_sequential_reads",
        "tfdata_cause", "tfdata_cause_ms_per_step", "tfdata_cause_pct", "tfdata_map_python",
        "tfdata_file_switch_ms_per_step",
    ),
    "placement": ("device_present", "host_op_count", "device_op_count", "host_op_time_pct", "host_op_time_ms",
                  "device_op_time_ms"),
    "precision": (
        "device_compute_ms", "fp16_pct", "bf16_pct", "tf32_pct", "fp32_pct", "int8_pct", "low_precision_pct",
        "xprof_16bit_pct", "tensor_core_capable", "compute_capability", "cpu_low_precision_pct",
        "precision_unknown_pct", "cpu_precision_source",
    ),
    "memory": (
        "memory_present", "memory_peak_bytes", "memory_capacity_bytes", "memory_peak_pct", "memory_peak_time_ms",
        "memory_fragmentation", "memory_allocator", "memory_peak_bytes_lifetime", "memory_peak_step",
        "memory_live_at_peak_bytes",
    ),
    "collectives": (
        "allreduce_present", "allreduce_ms_per_step", "allreduce_pct", "allreduce_overlap_pct",
        "allreduce_count_per_step", "param_count", "replicas", "link_bandwidth_gbps", "allreduce_expected_ms",
        "allreduce_expected_ring_ms", "allreduce_ratio", "allreduce_source", "allreduce_total_ms",
        "collective_exposed_pct",
    ),
    # retrace_pct, eager_ms and kernel_launch_host_pct are produced by the analyses but not yet in the README
    "eager": ("eager_pct", "eager_op_count", "tf_function_calls", "retrace_count", "retraced_functions",
              "retrace_pct", "eager_ms"),
    "overhead": ("kernel_launch_pct", "python_overhead_pct", "python_overhead_ms_per_step", "kernel_launch_host_pct",
                 "step_outliers_excess_ms", "step_outliers_excess_pct", "function_call_overhead_pct"),
    "multihost": (
        "hosts_count", "hosts_expected", "missing_hosts", "missing_hosts_count", "straggler_host", "straggler_ratio",
        "slowest_host", "slowest_host_ratio", "load_imbalance_pct", "hosts_misaligned", "hosts_misaligned_count",
        "common_steps", "median_host", "slowest_host_excess_pct",
    ),
    "datafiles": (
        "data_path", "data_files_count", "data_total_bytes", "data_file_min_bytes", "data_file_median_bytes",
        "data_file_p90_bytes", "data_largest_file_bytes", "data_file_mean_bytes", "data_small_files_count",
        "data_small_files_pct", "data_huge_files_count", "data_huge_files_pct", "data_shard_range_pct",
    ),
}


def readme_metric_names(path: Path | None = None) -> dict[str, set[str]]:
    r"""Metric names per module from the table in ``tfadvisor/analyses/README.md`` (empty if absent).

    Names are the backticked words of the metrics column; parenthesised text (values such as
    ``trace_context``, and notes) is dropped first. Rows such as "placement (more)" add to their module.
    """
    path = path or Path(__file__).resolve().parents[1] / "analyses" / "README.md"
    out: dict[str, set[str]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.match(r"`([a-z_]+)`", cells[0]) if len(cells) >= 3 else None
        if not m:
            continue
        body, prev = cells[1], None
        while prev != body:
            prev, body = body, re.sub(r"\([^()]*\)", "", body)
        out.setdefault(m.group(1), set()).update(re.findall(r"`([a-z][a-z0-9_]*)`", body))
    return out


#: Every metric name a rule may refer to: the list above plus whatever the analyses README documents.
KNOWN_METRICS: frozenset[str] = frozenset(
    {n for names in METRICS_BY_SOURCE.values() for n in names}
    | {n for names in readme_metric_names().values() for n in names})

__all__ = ["KNOWN_METRICS", "METRICS_BY_SOURCE", "readme_metric_names"]
