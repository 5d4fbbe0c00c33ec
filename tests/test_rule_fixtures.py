"""Each built-in rule on small metric dicts: one that fires, one that does not, and the edges.

Each case gives the metrics (anything absent is unknown) and the severity expected, or
None when the rule must not fire.
"""

from __future__ import annotations

import pytest
from capture_rule_cases import CAPTURE_CASES
from system_rule_cases import SYSTEM_CASES

from tfadvisor.advice import Finding, evaluate, evaluate_rule, load_rules, severity_at_least

RULES = {r.id: r for r in load_rules()}


def fire(rule_id: str, metrics: dict) -> Finding | None:
    return evaluate_rule(RULES[rule_id], metrics)


STEP = dict(steps_count=10, executions_count=10, step_time_mean_ms=20.0, step_time_median_ms=20.0)
TFDATA = dict(tfdata_present=True, tfdata_has_prefetch=True, tfdata_has_cache=True, tfdata_sequential_map=False,
              tfdata_expensive_map=False, tfdata_repeated_source_no_cache=False, tfdata_pipeline="Root::Prefetch::Map")
GPU = dict(device_present=True)
# each tf.data cause with the figures its message quotes (as the tfdata analysis names them)
MAP = dict(tfdata_map_stage="Map (ParallelMapV2)", tfdata_map_element_us=400.0)
GAIN = dict(tfdata_cause_ms_per_step=6.0, tfdata_cause_pct=30.0)  # what the named cause's fix saves
SEQ = dict(MAP, **GAIN, tfdata_sequential_map=True, tfdata_sequential_map_ms_per_step=12.8,
           tfdata_sequential_map_pct=64.0, tfdata_cause="sequential_map")
RECOMPUTE = dict(MAP, **GAIN, tfdata_repeated_source_no_cache=True, tfdata_repeat_before_map=True,
                 tfdata_recompute_ms_per_step=12.8, tfdata_recompute_pct=64.0, tfdata_cause="recompute")
CONTENTION = dict(tfdata_contention_pct=30.0, tfdata_contention_ms_per_step=6.0, tfdata_cpu_pct=60.0,
                  tfdata_cpu_ratio=1.5, tfdata_hot_stage="ParallelMapV2", tfdata_expensive_map=True)
GENERATOR = dict(GAIN, tfdata_generator=True, tfdata_generator_element_us=250.0, tfdata_generator_ms_per_step=8.0,
                 tfdata_generator_pct=40.0, tfdata_cause="generator")
READS = dict(GAIN, tfdata_sequential_reads=True, tfdata_files_per_step=2.0, tfdata_read_ms_per_step=9.0,
             tfdata_read_pct=45.0, tfdata_cause="sequential_reads")
VECTOR = dict(MAP, **GAIN, tfdata_vectorizable_map=True, tfdata_map_ms_per_step=5.0, tfdata_map_pct=25.0,
              tfdata_cause="vectorizable_map")

PERIODIC = dict(periodic_kind="summary", periodic_names="EagerLocalExecute: WriteSummary", periodic_every_steps=4,
                periodic_steps_count=3, periodic_ms_each=43.0, periodic_ms_per_step=12.9, periodic_pct=56.0,
                periodic_between_steps=True, periodic_traced_pct=75.0, periodic_suggested_every=500)
ONE_OFF = dict(one_off_step=17, one_off_kind="other", one_off_names="EagerLocalExecute: SaveV2", one_off_ms=37.0,
               one_off_pct=15.0)
WORK = dict(work_varies=True, work_cv_pct=60.0, work_spread=3.5, work_corr=0.97, work_excess_pct=45.0,
            work_excess_ms_per_step=9.0)
ITERATOR = dict(tfdata_iterators_per_step=1.0, tfdata_iterator_make_ms_per_step=11.1,
                tfdata_iterator_cost_ms_per_step=22.3, tfdata_iterator_cost_pct=84.0)
FILTER = dict(tfdata_filter_stage="Filter (FilterDataset:3)", tfdata_filter_kept_pct=30.6,
              tfdata_filter_waste_ms_per_step=17.1, tfdata_filter_waste_pct=67.0)
NV = {"device_vendor": "nvidia", "tensor_core_capable": True, "matrix_fp32_pct": 100.0, "matrix_unknown_pct": 0.0,
      "matrix_time_ms": 50.0}
AMD = {"device_vendor": "amd", "matrix_fp32_pct": 100.0, "matrix_unknown_pct": 0.0, "matrix_time_ms": 50.0,
       "framework": "jax"}


CASES = [
    # ---- input_bound: xprof thresholds 5 % / 20 %, a floor of 1 ms per step for prefetching pipelines
    ("input_bound", {**STEP, "input_pct": 78.0, "tfdata_has_prefetch": False}, "critical"),
    ("input_bound", {**STEP, "input_pct": 20.0}, "critical"),  # edge: exactly 20
    ("input_bound", {**STEP, "input_pct": 19.99}, "warning"),
    ("input_bound", {**STEP, "input_pct": 5.0}, "warning"),  # edge: exactly 5 (1 ms of a 20 ms step)
    ("input_bound", {**STEP, "input_pct": 4.99}, None),
    ("input_bound", {**STEP, "input_pct": None}, None),  # unknown never fires
    ("input_bound", {}, None),
    # a tuned pipeline: prefetch on, 0.4 ms of a 4.4 ms step (tfdata samples' figures)
    ("input_bound", {"steps_count": 10, "step_time_mean_ms": 4.38, "input_pct": 8.9, **TFDATA}, None),
    # ...but the same share without prefetch is a real wait
    ("input_bound", {"steps_count": 10, "step_time_mean_ms": 4.38, "input_pct": 8.9,
                     **{**TFDATA, "tfdata_has_prefetch": False}}, "warning"),
    # prefetch on but still 2 ms per step: the pipeline is too slow
    ("input_bound", {**STEP, "input_pct": 10.0, **TFDATA}, "warning"),
    # CPU contention without a wait is tfdata_cpu_contention's, not input_bound's
    ("input_bound", {**STEP, "input_pct": 1.0, "tfdata_cpu_ratio": 1.5, "tfdata_cpu_pct": 60.0,
                     "tfdata_contention_pct": 30.0}, None),
    # a named tf.data cause leads: input_bound stays an info
    ("input_bound", {**STEP, "input_pct": 60.0, "tfdata_cause": "sequential_map"}, "info"),
    # xprof's input figure alone (idle, eager, Python) is not input-bound
    ("input_bound", {**STEP, "input_pct": 0.0, "xprof_input_pct": 43.0}, None),
    # ---- tfdata_no_prefetch
    ("tfdata_no_prefetch", {**TFDATA, "tfdata_has_prefetch": False, "input_pct": 60.0}, "warning"),
    ("tfdata_no_prefetch", {**TFDATA, "tfdata_has_prefetch": False, "input_pct": 1.0}, "info"),
    ("tfdata_no_prefetch", {**TFDATA, "tfdata_has_prefetch": False}, "info"),
    ("tfdata_no_prefetch", {**TFDATA, "input_pct": 60.0}, None),
    ("tfdata_no_prefetch", {"tfdata_present": False, "tfdata_has_prefetch": False}, None),
    ("tfdata_no_prefetch", {"tfdata_present": True}, None),
    # ---- tfdata_sequential_map: warning/critical when it is the named cause, info otherwise
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 5.0}, "warning"),
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 20.0}, "critical"),
    # a CPU measured saturated: more map threads would compete with the step (system_preprocessing_bound says it)
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 20.0, "system_cpu_util_pct": 95.0}, None),
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 20.0, "system_cpu_util_pct": 40.0}, "critical"),
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 4.0}, "info"),
    ("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 60.0, "tfdata_cause": "recompute"}, "info"),
    ("tfdata_sequential_map", {**TFDATA, "input_pct": 60.0}, None),
    # ---- tfdata_no_cache
    ("tfdata_no_cache", {**TFDATA, **RECOMPUTE, "input_pct": 50.0}, "critical"),
    ("tfdata_no_cache", {**TFDATA, **RECOMPUTE, "input_pct": 5.0}, "warning"),
    ("tfdata_no_cache", {**TFDATA, **RECOMPUTE, "input_pct": 1.0, "tfdata_contention_pct": 25.0}, "warning"),
    ("tfdata_no_cache", {**TFDATA, "tfdata_repeated_source_no_cache": True, "input_pct": 50.0}, "info"),
    # map().repeat() with a one-at-a-time map: parallelising is the named cause (tfdata_sequential_map
    # leads); caching is still worth saying, as info
    ("tfdata_no_cache", {**TFDATA, **RECOMPUTE, "input_pct": 50.0, "tfdata_sequential_map": True,
                         "tfdata_repeat_before_map": False, "tfdata_cause": "sequential_map"}, "info"),
    ("tfdata_no_cache", {**TFDATA, "tfdata_repeated_source_no_cache": True, "input_pct": 1.0,
                         "tfdata_expensive_map": True}, "info"),
    ("tfdata_no_cache", {**TFDATA, "tfdata_repeated_source_no_cache": True, "input_pct": 1.0}, None),
    ("tfdata_no_cache", {**TFDATA, "input_pct": 50.0}, None),
    # ---- tfdata_expensive_map
    ("tfdata_expensive_map", {**TFDATA, "tfdata_expensive_map": True, "tfdata_map_element_us": 900.0,
                              "input_pct": 70.0}, "warning"),
    ("tfdata_expensive_map", {**TFDATA, "tfdata_expensive_map": True, "input_pct": 4.0, "tfdata_cpu_ratio": 1.2,
                              "tfdata_cpu_pct": 70.0}, "info"),  # CPU contention without a wait
    # a pipeline that keeps up is not worth re-engineering for its map cost alone
    ("tfdata_expensive_map", {**TFDATA, "tfdata_expensive_map": True, "input_pct": 0.7,
                              "tfdata_cpu_ratio": 0.05}, None),
    ("tfdata_expensive_map", {**TFDATA, "input_pct": 70.0}, None),
    # ---- tfdata_cpu_contention: the step slows while tf.data computes, little wait (10 % / 20 %)
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "input_pct": 1.0}, "critical"),
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "tfdata_contention_pct": 10.0, "input_pct": 1.0}, "warning"),
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "tfdata_contention_pct": 5.0}, "info"),  # edge
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "tfdata_contention_pct": 4.9}, None),
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "input_pct": 40.0}, None),  # the wait is larger
    # a window that is not steady state: the finding with a caveat (tfadvisor.advice.explain), never none
    ("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "capture_steady_state": False}, "critical"),
    ("tfdata_cpu_contention", {**TFDATA, "tfdata_contention_pct": None, "input_pct": 1.0}, None),
    # ---- tfdata_generator
    ("tfdata_generator", {**TFDATA, **GENERATOR, "input_pct": 30.0}, "critical"),
    ("tfdata_generator", {**TFDATA, **GENERATOR, "input_pct": 1.0, "tfdata_contention_pct": 6.0}, "warning"),
    ("tfdata_generator", {**TFDATA, **GENERATOR, "input_pct": 30.0, "tfdata_cause": None}, "info"),
    ("tfdata_generator", {**TFDATA, **GENERATOR, "input_pct": 4.9}, None),
    ("tfdata_generator", {**TFDATA, "tfdata_generator": False, "input_pct": 30.0}, None),
    # ---- tfdata_sequential_reads
    ("tfdata_sequential_reads", {**TFDATA, **READS, "input_pct": 50.0}, "critical"),
    ("tfdata_sequential_reads", {**TFDATA, **READS, "input_pct": 5.0}, "warning"),
    ("tfdata_sequential_reads", {**TFDATA, **READS, "input_pct": 4.9}, None),
    ("tfdata_sequential_reads", {**TFDATA, **READS, "tfdata_sequential_reads": False, "input_pct": 50.0}, None),
    # ---- tfdata_vectorizable_map
    ("tfdata_vectorizable_map", {**TFDATA, **VECTOR, "input_pct": 25.0}, "critical"),
    ("tfdata_vectorizable_map", {**TFDATA, **VECTOR, "input_pct": 1.0, "tfdata_contention_pct": 8.0}, "warning"),
    ("tfdata_vectorizable_map", {**TFDATA, **VECTOR, "input_pct": 1.0, "tfdata_contention_pct": 4.0}, None),
    ("tfdata_vectorizable_map", {**TFDATA, "tfdata_vectorizable_map": False, "input_pct": 25.0}, None),
    # ---- h2d_pageable
    ("h2d_pageable", {"h2d_pageable_pct": 80.0, "h2d_exposed_pct": 6.0}, "warning"),
    ("h2d_pageable", {"h2d_pageable_pct": 50.0, "h2d_exposed_pct": 2.0}, "warning"),  # edges
    ("h2d_pageable", {"h2d_pageable_pct": 49.0, "h2d_exposed_pct": 6.0}, None),
    ("h2d_pageable", {"h2d_pageable_pct": 90.0, "h2d_exposed_pct": 1.9}, None),
    # ---- step_gaps
    ("step_gaps", {**STEP, "idle_between_steps_pct": 78.0, "gaps_count": 9, "gap_mean_ms": 50.0,
                   "gap_max_ms": 52.0, "gap_host_activity": "python"}, "critical"),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 30.0}, "critical"),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 10.0}, "warning"),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 9.9}, None),
    ("step_gaps", {"steps_count": 1, "idle_between_steps_pct": 80.0}, None),
    ("step_gaps", {**STEP, "idle_pct": 80.0}, None),  # idle inside steps is not a gap between them
    ("step_gaps", {**STEP, "idle_between_steps_pct": 15.0, "gap_host_activity": "input"}, "warning"),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 45.0, "gap_host_activity": "input"}, "critical"),
    # ---- step_outliers: impact = the outliers' summed excess over the median, % of all step time
    ("step_outliers", {**STEP, "step_outliers_count": 1, "step_outlier_max_ratio": 1.5,
                       "step_outliers_excess_pct": 5.0}, "info"),
    ("step_outliers", {**STEP, "step_outliers_count": 3, "step_outlier_max_ratio": 3.0,
                       "step_outliers_excess_pct": 9.9}, "info"),  # a big ratio alone is not a warning
    ("step_outliers", {**STEP, "step_outliers_count": 1, "step_outlier_max_ratio": 3.0,
                       "step_outliers_excess_pct": 10.0}, "warning"),
    ("step_outliers", {**STEP, "step_outliers_count": 1, "step_outlier_max_ratio": 1.49}, None),
    ("step_outliers", {**STEP, "step_outliers_count": 0, "step_outlier_max_ratio": 1.0}, None),
    ("step_outliers", {**STEP, "steps_count": 4, "executions_count": 4, "step_outliers_count": 1,
                       "step_outlier_max_ratio": 5.0}, None),
    # steps_per_execution = 10: outliers are found among the 4 calls (markers), too few whatever the 40 steps
    ("step_outliers", {**STEP, "steps_count": 40, "executions_count": 4, "step_outliers_count": 1,
                       "step_outlier_max_ratio": 5.0}, None),
    ("step_outliers", {**STEP, "steps_count": 50, "executions_count": 5, "step_outliers_count": 1,
                       "step_outlier_max_ratio": 5.0, "step_outliers_excess_pct": 5.0}, "info"),
    # ---- kernel_launch_bound: xprof 3 % / 15 %
    ("kernel_launch_bound", {**GPU, **STEP, "kernel_launch_pct": 15.0}, "critical"),
    ("kernel_launch_bound", {**GPU, **STEP, "kernel_launch_pct": 3.0}, "warning"),
    ("kernel_launch_bound", {**GPU, **STEP, "kernel_launch_pct": 2.9}, None),
    ("kernel_launch_bound", {"device_present": False, "kernel_launch_pct": 40.0}, None),
    # ---- eager_execution: xprof > 10 %
    ("eager_execution", {**STEP, "eager_pct": 85.0, "eager_op_count": 2980}, "critical"),
    ("eager_execution", {**STEP, "eager_pct": 10.0, "eager_op_count": 100}, "warning"),  # edges: 10 %, 10/step
    ("eager_execution", {**STEP, "eager_pct": 9.9, "eager_op_count": 2980}, None),
    ("eager_execution", {**STEP, "eager_pct": 40.0, "eager_op_count": 99}, None),  # < 10 ops per step
    # one eager op per step (e.g. a next(iterator) or one big op) is not dispatch overhead
    ("eager_execution", {**STEP, "eager_pct": 78.0, "eager_op_count": 10}, None),
    ("eager_execution", {"eager_pct": 50.0, "eager_op_count": 500}, "critical"),  # no steps found
    ("eager_execution", {"eager_pct": 50.0, "eager_op_count": 50}, None),
    ("eager_execution", {**STEP, "eager_pct": None, "eager_op_count": 2980}, None),
    # ---- retracing
    ("retracing", {"steps_count": 8, "executions_count": 8, "retrace_count": 8, "retraced_functions": "train_step",
                   "retrace_pct": 90.0}, "critical"),
    ("retracing", {"steps_count": 8, "executions_count": 8, "retrace_count": 4}, "critical"),  # edge: half the steps
    # steps_per_execution=10: 8 calls of 10 steps, retraced on half the calls
    ("retracing", {"steps_count": 80, "executions_count": 8, "retrace_count": 4}, "critical"),
    ("retracing", {"steps_count": 100, "executions_count": 100, "retrace_count": 2}, "warning"),
    ("retracing", {"steps_count": 100, "executions_count": 100, "retrace_count": 1}, None),
    ("retracing", {"steps_count": 100, "executions_count": 100, "retrace_count": 0}, None),
    ("retracing", {"retrace_count": 3}, "warning"),  # steps unknown: not escalated
    # no steps found (steps_count and executions_count 0): retraces with no step to spread over are critical
    ("retracing", {"steps_count": 0, "executions_count": 0, "retrace_count": 3}, "critical"),
    # ---- python_overhead
    ("python_overhead", {**STEP, "python_overhead_pct": 60.0, "eager_pct": 1.0, "retrace_count": 0}, "critical"),
    ("python_overhead", {**STEP, "python_overhead_pct": 10.0, "eager_pct": 1.0, "retrace_count": 0}, "warning"),
    ("python_overhead", {**STEP, "python_overhead_pct": 9.9, "eager_pct": 1.0, "retrace_count": 0}, None),
    ("python_overhead", {**STEP, "python_overhead_pct": 60.0}, "critical"),  # eager/retrace unknown
    ("python_overhead", {**STEP, "python_overhead_pct": 60.0, "eager_pct": 40.0}, None),  # eager explains it
    ("python_overhead", {**STEP, "python_overhead_pct": 60.0, "retrace_count": 5}, None),  # retracing does
    # ---- host_ops_with_device
    ("host_ops_with_device", {**GPU, "host_op_time_pct": 25.0, "host_op_count": 40}, "warning"),
    ("host_ops_with_device", {**GPU, "host_op_time_pct": 10.0}, "warning"),
    ("host_ops_with_device", {**GPU, "host_op_time_pct": 9.0}, None),
    ("host_ops_with_device", {"device_present": False, "host_op_time_pct": 100.0}, None),
    # ---- mixed_precision_unused (NVIDIA) / mixed_precision_unused_amd: the matrix work's known dtypes
    ("mixed_precision_unused", {**NV, "matrix_fp32_pct": 100.0, "step_device_compute_pct": 70.0,
                                "compute_capability": "8.0"}, "warning"),
    ("mixed_precision_unused", {**NV, "matrix_fp32_pct": 90.0, "step_device_compute_pct": 20.0}, "warning"),
    ("mixed_precision_unused", {**NV, "matrix_fp32_pct": 89.0, "step_device_compute_pct": 70.0}, None),
    ("mixed_precision_unused", {**NV, "tensor_core_capable": False, "step_device_compute_pct": 70.0},
     None),  # e.g. a P100
    ("mixed_precision_unused", {**NV, "step_device_compute_pct": 5.0}, None),  # compute is not what matters
    ("mixed_precision_unused", {**NV, "device_compute_ms": 12.0}, "warning"),  # no step breakdown
    ("mixed_precision_unused", {**NV, "matrix_unknown_pct": 60.0, "step_device_compute_pct": 70.0},
     None),  # kernel names that tell no type are not fp32
    ("mixed_precision_unused", {**NV, "device_vendor": "amd", "step_device_compute_pct": 70.0}, None),
    ("mixed_precision_unused", {**NV, "matrix_fp32_pct": None, "step_device_compute_pct": 70.0},
     None),  # no matrix work
    ("mixed_precision_unused_amd", {**AMD, "step_device_compute_pct": 70.0}, "warning"),
    ("mixed_precision_unused_amd", {**AMD, "device_compute_ms": 3.0, "steps_count": 0}, "warning"),
    ("mixed_precision_unused_amd", {**AMD, "matrix_fp32_pct": 0.0, "device_compute_ms": 3.0}, None),  # bf16
    ("mixed_precision_unused_amd", {**AMD, "device_vendor": "nvidia", "step_device_compute_pct": 70.0}, None),
    # ---- memory_oom_risk / memory_headroom
    ("memory_oom_risk", {**GPU, "memory_peak_pct": 95.0, "memory_capacity_bytes": 16 * 2**30,
                         "memory_peak_bytes": 15.2 * 2**30}, "warning"),
    ("memory_oom_risk", {**GPU, "memory_peak_pct": 98.0, "memory_capacity_bytes": 1}, "critical"),
    ("memory_oom_risk", {**GPU, "memory_peak_pct": 90.0, "memory_capacity_bytes": 1}, None),  # edge: > 90
    ("memory_oom_risk", {"device_present": False, "memory_peak_pct": 99.0, "memory_capacity_bytes": 1}, None),
    ("memory_headroom", {**GPU, "memory_peak_pct": 20.0, "memory_capacity_bytes": 40 * 2**30, "complete_steps": 10,
                         "memory_peak_bytes": 8 * 2**30}, "info"),
    ("memory_headroom", {**GPU, "memory_peak_pct": 50.0, "memory_capacity_bytes": 1}, None),  # edge: < 50
    ("memory_headroom", {**GPU, "memory_peak_pct": None, "memory_capacity_bytes": None}, None),
    ("memory_headroom", {"device_present": False, "memory_peak_pct": 5.0, "memory_capacity_bytes": 1}, None),
    # ---- allreduce_share: collective_exposed_pct (the breakdown's collective share not hidden behind
    # compute); 10 % warning, 30 % critical
    ("allreduce_share", {"allreduce_present": True, "step_collective_pct": 40.0, "collective_exposed_pct": 40.0},
     "critical"),
    ("allreduce_share", {"allreduce_present": True, "step_collective_pct": 40.0, "collective_exposed_pct": 20.0},
     "warning"),
    ("allreduce_share", {"allreduce_present": True, "step_collective_pct": 40.0, "collective_exposed_pct": 9.9},
     None),
    ("allreduce_share", {"allreduce_present": True, "step_collective_pct": 40.0}, None),  # exposed unknown
    ("allreduce_share", {"allreduce_present": False, "collective_exposed_pct": 50.0}, None),
    # the others wait in AllReduce for a straggler: straggler_host names that cause instead
    ("allreduce_share", {"allreduce_present": True, "collective_exposed_pct": 35.0, "straggler_ratio": 1.6}, None),
    ("allreduce_share", {"allreduce_present": True, "collective_exposed_pct": 35.0, "straggler_ratio": 1.05},
     "critical"),
    # ---- straggler_host / missing_host / load_imbalance
    ("straggler_host", {"hosts_count": 4, "straggler_ratio": 1.6, "straggler_host": "worker3"}, "critical"),
    ("straggler_host", {"hosts_count": 4, "straggler_ratio": 1.2}, "warning"),
    ("straggler_host", {"hosts_count": 4, "straggler_ratio": 1.19}, None),
    ("straggler_host", {"hosts_count": 1, "straggler_ratio": 3.0}, None),
    # one slow GPU of the straggler host is the cause: device_straggler names it
    ("straggler_host", {"hosts_count": 4, "straggler_ratio": 1.4, "straggler_host": "w3",
                        "device_straggler_host": "w3"}, None),
    ("straggler_host", {"hosts_count": 4, "straggler_ratio": 1.4, "straggler_host": "w3",
                        "device_straggler_host": "w1"}, "warning"),
    ("device_straggler", {"device_straggler": "GPU:5", "device_straggler_ratio": 1.6, "device_straggler_wait_ms": 30.0,
                          "device_straggler_wait_pct": 22.0}, "critical"),
    ("device_straggler", {"device_straggler": "GPU:5", "device_straggler_ratio": 1.25, "device_straggler_wait_ms": 10.0,
                          "device_straggler_wait_pct": 9.0}, "warning"),
    ("device_straggler", {"device_straggler": None, "device_straggler_ratio": None}, None),
    ("missing_host", {"hosts_count": 3, "hosts_expected": 4, "missing_hosts": "worker2",
                      "missing_hosts_count": 1}, "warning"),
    ("missing_host", {"hosts_count": 4, "hosts_expected": 4, "missing_hosts": None, "missing_hosts_count": 0}, None),
    ("missing_host", {"hosts_count": 2, "missing_hosts_count": 1}, "warning"),  # names unknown, a count missing
    ("missing_host", {"hosts_count": 2, "hosts_expected": 2}, None),
    ("missing_host", {"hosts_count": 2}, None),
    ("load_imbalance", {"hosts_count": 2, "load_imbalance_pct": 30.0}, "critical"),
    ("load_imbalance", {"hosts_count": 2, "load_imbalance_pct": 10.0}, "warning"),
    ("load_imbalance", {"hosts_count": 2, "load_imbalance_pct": 9.0}, None),
    ("load_imbalance", {"hosts_count": 1, "load_imbalance_pct": 90.0}, None),
    # one straggler explains the imbalance: straggler_host reports it
    ("load_imbalance", {"hosts_count": 4, "load_imbalance_pct": 58.0, "straggler_host": "host2"}, None),
    # ---- data files (small < 1 MiB, huge >= 1 GiB)
    ("data_small_files", {"data_files_count": 200_000, "data_small_files_pct": 99.0,
                          "data_file_median_bytes": 80_000, "data_total_bytes": 16e9}, "warning"),
    ("data_small_files", {"data_files_count": 100, "data_small_files_pct": 50.0}, "warning"),  # edges
    ("data_small_files", {"data_files_count": 99, "data_small_files_pct": 100.0}, None),
    ("data_small_files", {"data_files_count": 5000, "data_small_files_pct": 10.0}, None),
    ("data_huge_files", {"data_files_count": 2, "data_largest_file_bytes": 20 * 2**30,
                         "data_total_bytes": 40 * 2**30, "data_file_median_bytes": 20 * 2**30}, "warning"),
    ("data_huge_files", {"data_files_count": 500, "data_largest_file_bytes": 30 * 2**30,
                         "data_total_bytes": 50 * 2**30}, "warning"),  # one file holds most of it
    ("data_huge_files", {"data_files_count": 500, "data_largest_file_bytes": 2 * 2**30,
                         "data_total_bytes": 900 * 2**30}, None),  # many big files read fine in parallel
    ("data_huge_files", {"data_files_count": 4, "data_largest_file_bytes": 2**30 - 1,
                         "data_total_bytes": 3 * 2**30}, None),  # edge: just under 1 GiB
    # ---- from the attribution: Python functions, op-by-op JAX, TF32 matrix work
    ("python_hotspot", {**STEP, "attr_python_pct": 97.0, "attr_python_top_pct": 83.0,
                        "attr_python_top": "augment (x.py:65) 83 %"}, "warning"),
    ("python_hotspot", {**STEP, "attr_python_pct": 30.0, "attr_python_top_pct": 25.0}, "warning"),  # edges
    ("python_hotspot", {**STEP, "attr_python_pct": 29.9, "attr_python_top_pct": 25.0}, None),
    ("python_hotspot", {**STEP, "attr_python_pct": 72.0, "attr_python_top_pct": 18.0}, None),  # no one function
    ("python_hotspot", {**STEP, "attr_python_pct": 95.0, "attr_python_top_pct": 30.0,
                        "xla_executions_per_step": 82.0}, None),  # op by op: jax_op_by_op says it
    ("jax_op_by_op", {**STEP, "framework": "jax", "xla_executions_per_step": 82.0, "attr_python_pct": 95.0},
     "critical"),
    ("jax_op_by_op", {**STEP, "framework": "jax", "xla_executions_per_step": 10.0, "attr_python_pct": 30.0},
     "warning"),  # edges
    ("jax_op_by_op", {**STEP, "framework": "jax", "xla_executions_per_step": 1.0, "attr_python_pct": 72.0}, None),
    ("jax_op_by_op", {**STEP, "framework": "tensorflow", "xla_executions_per_step": 82.0,
                      "attr_python_pct": 95.0}, None),
    ("matrix_tf32", {**STEP, "device_vendor": "nvidia", "tensor_core_capable": True, "matrix_tf32_pct": 98.0,
                     "matrix_unknown_pct": 0.0, "attr_matrix_pct": 67.0}, "warning"),
    ("matrix_tf32", {**STEP, "device_vendor": "nvidia", "tensor_core_capable": True, "matrix_tf32_pct": 98.0,
                     "matrix_unknown_pct": 0.0, "attr_matrix_pct": 24.0}, None),  # a small share of the time
    ("matrix_tf32", {**STEP, "device_vendor": "nvidia", "tensor_core_capable": True, "matrix_tf32_pct": 0.0,
                     "matrix_unknown_pct": 0.0, "attr_matrix_pct": 67.0}, None),  # bf16 already
    # ---- causes in time and structure: work in some steps only, one-time phases, the pipeline as built
    ("periodic_step_work", {**PERIODIC, "periodic_kind": "checkpoint"}, "warning"),
    ("periodic_step_work", {**PERIODIC, "periodic_kind": "untraced", "periodic_names": ""}, "warning"),
    ("periodic_step_work", {**PERIODIC, "periodic_pct": 7.0}, "info"),
    ("periodic_step_work", {**PERIODIC, "periodic_pct": 4.9}, None),  # edge: under 5 %
    ("periodic_step_work", {**PERIODIC, "capture_steady_state": False}, "warning"),  # with a caveat
    # the periodic work explains the outliers and the time between steps: those rules stay quiet
    ("step_outliers", {**STEP, "step_outliers_count": 3, "step_outlier_max_ratio": 4.0, **PERIODIC}, None),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 40.0, **PERIODIC, "periodic_between_steps": True}, None),
    ("step_gaps", {**STEP, "idle_between_steps_pct": 40.0, **PERIODIC, "periodic_between_steps": False},
     "critical"),
    ("one_off_slow_step", {**STEP, **ONE_OFF}, "info"),
    ("one_off_slow_step", {**STEP, **ONE_OFF, "one_off_kind": "compilation"}, "info"),
    ("one_off_slow_step", {**STEP, **ONE_OFF, "one_off_pct": 4.0}, None),
    # one slow step with its own work: one_off_slow_step names it, step_outliers stays quiet
    ("step_outliers", {**STEP, "step_outliers_count": 2, "step_outlier_max_ratio": 8.0,
                       "step_outliers_excess_pct": 17.0, **ONE_OFF}, None),
    # outliers beyond what the one-off step explains: still reported
    ("step_outliers", {**STEP, "step_outliers_count": 3, "step_outlier_max_ratio": 8.0,
                       "step_outliers_excess_pct": 40.0, **ONE_OFF}, "warning"),
    ("variable_work_per_step", {**STEP, **WORK}, "warning"),
    ("variable_work_per_step", {**STEP, **WORK, "work_excess_pct": 15.0}, "info"),
    ("variable_work_per_step", {**STEP, **WORK, "work_varies": False}, None),
    # contention spreads op times too: not read as work that varies
    ("variable_work_per_step", {**STEP, **WORK, "tfdata_contention_pct": 40.0}, None),
    ("variable_work_per_step", {**STEP, **WORK, "input_pct": 60.0}, None),
    ("step_outliers", {**STEP, "step_outliers_count": 2, "step_outlier_max_ratio": 3.0, **WORK}, None),
    ("phase_cache_fill", {**STEP, **TFDATA, "capture_phase": "cache_fill", "complete_steps": 12,
                          "tfdata_cost_ms_per_step": 8.9, "tfdata_cost_pct": 84.0, "input_pct": 55.0}, "critical"),
    ("phase_cache_fill", {**STEP, **TFDATA, "capture_phase": "cache_fill", "complete_steps": 12,
                          "tfdata_cost_ms_per_step": 1.5, "tfdata_cost_pct": 12.0, "input_pct": 10.0}, "warning"),
    ("phase_cache_fill", {**STEP, **TFDATA, "capture_phase": None, "complete_steps": 12,
                          "tfdata_cost_ms_per_step": 8.9, "tfdata_cost_pct": 84.0}, None),
    # in the cache's first pass the pipeline's advice holds, with a caveat (folded into phase_cache_fill's finding)
    ("tfdata_no_cache", {**STEP, **TFDATA, **RECOMPUTE, "input_pct": 30.0, "tfdata_has_cache": False,
                         "capture_phase": "cache_fill"}, "critical"),
    ("tfdata_iterator_per_step", {**STEP, **TFDATA, **ITERATOR, "input_pct": 40.0,
                                  "tfdata_cause": "iterator_per_step"}, "critical"),
    ("tfdata_iterator_per_step", {**STEP, **TFDATA, **ITERATOR}, "warning"),
    ("tfdata_iterator_per_step", {**STEP, **TFDATA, **ITERATOR, "tfdata_iterators_per_step": 0.0}, None),
    # steps_per_execution=10: one iterator per call of the train function is 0.1 per training step
    ("tfdata_iterator_per_step", {**STEP, **TFDATA, **ITERATOR, "steps_count": 80, "executions_count": 8,
                                  "tfdata_iterators_per_step": 0.1}, "warning"),
    ("tfdata_filter_after_map", {**STEP, **TFDATA, **MAP, **FILTER, "input_pct": 60.0,
                                 "tfdata_cause": "filter_after_map"}, "critical"),
    ("tfdata_filter_after_map", {**STEP, **TFDATA, **MAP, **FILTER}, "warning"),
    ("tfdata_filter_after_map", {**STEP, **TFDATA, **MAP, **FILTER, "tfdata_filter_waste_pct": 6.0}, "info"),
    ("tfdata_filter_after_map", {**STEP, **TFDATA, **MAP, **FILTER, "tfdata_filter_kept_pct": 95.0}, None),
    ("numpy_input_per_step", {**STEP, "numpy_feed_per_step": 2.0, "numpy_feed_ms_per_step": 9.0,
                              "numpy_feed_pct": 40.0}, "warning"),
    ("numpy_input_per_step", {**STEP, "numpy_feed_per_step": 2.0, "numpy_feed_ms_per_step": 1.2,
                              "numpy_feed_pct": 6.0}, "info"),
    ("numpy_input_per_step", {**STEP, "numpy_feed_per_step": 6.0, "numpy_feed_ms_per_step": 0.3,
                              "numpy_feed_pct": 0.2}, None),
]


CASES += SYSTEM_CASES  # tests/system_rule_cases.py: the system rules
CASES += CAPTURE_CASES  # tests/capture_rule_cases.py: capture quality, and the step rules on a fragment
# the generic explanation of each part of the wall time (rules/90_cost.toml): from 10 % of it, a warning from 30 %
CASES += [(f"cost_{p}", {f"attr_{p}_pct": pct, f"attr_{p}_ms": 3.0, "attr_wall_ms": 100.0}, sev)
          for p in ("collective", "matrix", "data_movement", "optimizer", "gather_scatter", "custom_call",
                    "elementwise", "input", "between_steps", "runtime", "host_ops", "python", "idle", "outside_steps")
          for pct, sev in ((9.9, None), (10.0, "info"), (30.0, "warning"), (None, None))]
# the parts of the program (rules/80_components.toml, tfadvisor/analyses/components.py): from 10 % of the wall time
# (Python in the step and debugging checks from 5 %), the edge and the quiet side of each, and each case
COMP = dict(STEP, attr_wall_ms=100.0, comp_summary="layer dense 40 %")
CASES += [
    ("component_metric", dict(COMP, comp_metric="auc", comp_metric_class="auc", comp_metric_pct=10.0,
                              comp_metric_ms=2.0, comp_metric_part="elementwise"), "warning"),
    ("component_metric", dict(COMP, comp_metric="auc", comp_metric_pct=9.9, comp_metric_ms=2.0,
                              comp_metric_part="elementwise"), None),
    ("component_metric", dict(COMP, comp_metric="auc", comp_metric_pct=None, comp_metric_part="elementwise"), None),
    ("component_optimizer", dict(COMP, comp_optimizer="adam", comp_optimizer_pct=12.0, comp_optimizer_ms=1.0,
                                 comp_optimizer_ratio=0.4, comp_optimizer_part="elementwise"), "info"),
    # the dense update of a table: twice the model's own op time, in a model with lookups
    ("component_optimizer", dict(COMP, comp_optimizer="adam", comp_optimizer_pct=80.0, comp_optimizer_ms=30.0,
                                 comp_optimizer_ratio=2.0, comp_optimizer_part="elementwise", comp_lookup_pct=5.0,
                                 comp_lookup_where="layer embedding 5 %"), "warning"),
    ("component_optimizer", dict(COMP, comp_optimizer="adam", comp_optimizer_pct=9.9, comp_optimizer_ratio=0.4,
                                 comp_optimizer_part="elementwise"), None),
    ("component_loss", dict(COMP, comp_loss="compile_loss/x", comp_loss_pct=10.0, comp_loss_ms=2.0,
                            comp_loss_ratio=0.5, comp_loss_part="runtime"), "warning"),
    ("component_loss", dict(COMP, comp_loss="compile_loss/x", comp_loss_pct=9.9, comp_loss_ratio=0.5,
                            comp_loss_part="runtime"), None),
    ("component_py_function", dict(COMP, comp_py_function_pct=5.0, comp_py_function_ms=1.0,
                                   comp_py_function_part="elementwise", comp_py_function_where="layer f 5 %"),
     "warning"),
    ("component_py_function", dict(COMP, comp_py_function_pct=4.9, comp_py_function_part="elementwise"), None),
    ("component_debug_checks", dict(COMP, comp_debug_pct=5.0, comp_debug_ms=1.0, comp_debug_part="elementwise",
                                    comp_debug_where="optimizer adam 5 %"), "warning"),
    ("component_debug_checks", dict(COMP, comp_debug_pct=4.9, comp_debug_part="elementwise"), None),
    ("component_layer", dict(COMP, comp_layer="tokens", comp_layer_pct=10.0, comp_layer_ms=5.0,
                             comp_layer_types="Sum, BatchMatMulV2, OneHot", comp_layer_part="matrix",
                             comp_one_hot_pct=1.0, comp_one_hot_where="layer tokens 1 %"), "warning"),
    # a large layer without a cause the rule knows is the part's (its generic finding names it)
    ("component_layer", dict(COMP, comp_layer="dense", comp_layer_pct=80.0, comp_layer_part="matrix"), None),
    ("component_dtype_policy", dict(COMP, device_present=False, attr_matrix_pct=10.0, attr_matrix_ms=5.0,
                                    comp_dtype_policy="mixed_float16", cpu_fast_bf16=True), "warning"),
    ("component_dtype_policy", dict(COMP, device_present=False, attr_matrix_pct=50.0, attr_matrix_ms=5.0,
                                    comp_dtype_policy="mixed_bfloat16", cpu_fast_bf16=False), "warning"),
    # bfloat16 where the CPU has fast bfloat16 math, or float16 on a GPU: the right policy
    ("component_dtype_policy", dict(COMP, device_present=False, attr_matrix_pct=50.0,
                                    comp_dtype_policy="mixed_bfloat16", cpu_fast_bf16=True), None),
    ("component_dtype_policy", dict(COMP, device_present=True, attr_matrix_pct=50.0,
                                    comp_dtype_policy="mixed_float16"), None),
    # gradients taken several times: 8x the forward pass (single backward passes measured 0.4-5.5 on the samples)
    ("component_gradient", dict(COMP, comp_gradient_pct=80.0, comp_gradient_ms=40.0, comp_gradient_ratio=8.0,
                                comp_gradient_part="matrix"), "warning"),
    ("component_gradient", dict(COMP, comp_gradient_pct=80.0, comp_gradient_ratio=7.9,
                                comp_gradient_part="matrix"), None),
]
# the time outside the steps by cause (tfadvisor/analyses/throughput.py): a share of the throughput window
WHOLE = dict(STEP, throughput_ms_per_step=40.0)
CASES += [(f"outside_{rule}", dict(WHOLE, **{f"outside_{m}_pct": pct, f"outside_{m}_ms": 300.0,
                                               f"outside_{m}_ms_per_step": 15.0, f"outside_{m}_count": 2,
                                               "outside_eval_steps_per_train_step": 6.0, "outside_eval_step_ms": 2.5}),
           sev)
          for rule, m in (("evaluation", "eval"), ("checkpoint", "checkpoint"), ("epoch_end", "epoch_end"))
          for pct, sev in ((4.9, None), (5.0, "info"), (25.0, "warning"), (None, None))]


@pytest.mark.parametrize("rule_id, metrics, severity", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_fixture(rule_id, metrics, severity):
    f = fire(rule_id, metrics)
    if severity is None:
        assert f is None, f"{rule_id} fired: {f and f.message}"
    else:
        assert f is not None, f"{rule_id} did not fire"
        assert f.severity == severity, f.message
        assert f.rule == rule_id and f.title and f.message and f.fix


def test_every_rule_has_a_firing_and_a_quiet_fixture():
    fires = {c[0] for c in CASES if c[2] is not None}
    quiet = {c[0] for c in CASES if c[2] is None}
    missing = set(RULES) - (fires & quiet) - {"allreduce_overhead"}  # the AllReduce rule has its own tests below
    assert not missing, f"rules without both fixtures: {sorted(missing)}"


def test_eager_impact_counts_python_dispatch_time():
    f = fire("eager_execution", {**STEP, "eager_pct": 33.0, "eager_op_count": 2980, "python_overhead_pct": 45.0})
    assert f.severity == "critical" and f.impact_pct == 78.0
    f = fire("eager_execution", {**STEP, "eager_pct": 15.0, "eager_op_count": 2980, "python_overhead_pct": 95.0})
    assert f.severity == "warning" and f.impact_pct == 100.0
    f = fire("eager_execution", {**STEP, "eager_pct": 15.0, "eager_op_count": 2980})
    assert f.impact_pct == 15.0


def test_messages_quote_the_evidence():
    f = fire("input_bound", {**STEP, "input_pct": 78.25, "tfdata_has_prefetch": False})
    assert f.message == "78.2 % of step time (15.7 ms per step) is spent waiting for the next batch"
    assert f.evidence == {"input_pct": 78.25, "step_time_mean_ms": 20.0}  # unknown metrics are left out
    assert f.impact_pct == 78.25
    f = fire("tfdata_cpu_contention", {**TFDATA, **CONTENTION, "input_pct": 1.0})
    assert f.title == "The input pipeline takes the CPU the train step needs"
    assert f.message == ("The train step loses about 6.0 ms per step (30 % of step time) to CPU contention: "
                         "tf.data threads use 60 % of the host's CPU while it runs, mostly in ParallelMapV2")
    assert f.impact_pct == 30.0 and f.evidence["tfdata_cpu_ratio"] == 1.5
    assert "cpu_budget" in f.fix  # named as what not to do
    f = fire("tfdata_sequential_map", {**TFDATA, **SEQ, "input_pct": 70.0})
    assert f.message.startswith("The map stage Map (ParallelMapV2) runs one element at a time")
    assert "400 µs per element, 12.8 ms of work per step (64 % of step time), part of the 70 %" in f.message
    assert "unknown" not in f.message
    for rid, m in [("tfdata_no_cache", RECOMPUTE), ("tfdata_generator", GENERATOR),
                   ("tfdata_sequential_reads", READS), ("tfdata_vectorizable_map", VECTOR)]:
        f = fire(rid, {**TFDATA, **m, "input_pct": 30.0})
        assert f is not None and "unknown" not in f.message, (rid, f and f.message)
    f = fire("memory_oom_risk", {**GPU, "memory_peak_pct": 95.0, "memory_capacity_bytes": 16 * 2**30,
                                 "memory_peak_bytes": 15.2 * 2**30, "memory_allocator": "GPU_0_bfc"})
    assert f.message == "Peak memory in use is 15.2 GiB, 95 % of the 16.0 GiB available (GPU_0_bfc)"
    f = fire("step_gaps", {**STEP, "idle_between_steps_pct": 40.0, "gap_host_activity": "input", "gaps_count": 9,
                           "gap_mean_ms": 8.0})
    assert f.title.endswith("waiting for input") and "outside the step" in f.message


# --------------------------------------------------------------------------- AllReduce, by hand

AR = dict(allreduce_present=True, step_collective_pct=40.0, collective_exposed_pct=40.0)


def test_step_counts_say_what_a_marker_is():
    """Under steps_per_execution a step marker is a call of K training steps: the outlier and periodic messages
    count markers and say so (they said "2 of 40 steps" of 2 calls among 4)."""
    out = dict(STEP, step_outliers_count=2, step_outlier_max_ratio=3.0, step_outliers_excess_pct=6.0,
               step_outliers_excess_ms=12.0)
    f = fire("step_outliers", dict(out, steps_count=50, executions_count=5, step_markers_word="calls of 10 steps"))
    assert f.message.startswith("2 of 5 calls of 10 steps are outliers; the slowest takes 3.0x the median step")
    f = fire("step_outliers", dict(out, step_markers_word="steps"))
    assert f.message.startswith("2 of 10 steps are outliers")
    per = dict(STEP, periodic_pct=6.0, periodic_steps_count=2, periodic_every_steps=20, periodic_ms_each=60.0,
               periodic_ms_per_step=1.2, periodic_kind="checkpoint", periodic_names="SaveV2")
    f = fire("periodic_step_work", dict(per, step_markers_word="calls of 4 steps"))
    assert f.message.startswith("2 of the window's calls of 4 steps, one every 20 steps, carry extra work")
    f = fire("periodic_step_work", dict(per, periodic_kind="untraced", periodic_pct=12.0, step_markers_word="steps"))
    assert f.message.startswith("2 steps, 20 steps apart, take 60.0 ms more than the others")
    f = fire("periodic_step_work", dict(per, periodic_kind="untraced", periodic_pct=12.0, step_markers_word="steps",
                                        periodic_every_steps=None))
    assert f.message.startswith("2 steps take 60.0 ms more than the others")


def test_allreduce_ring_formula_by_hand():
    # 25 M params x 4 bytes = 100 MB; at 10 GB/s: 10 ms; ring over 4: 10 x 2 x 3 / 4 = 15 ms.
    # Threshold 1.5 x 15 = 22.5 ms.
    m = dict(AR, param_count=25_000_000, link_bandwidth_gbps=10.0, replicas=4, step_time_mean_ms=75.0)
    f = fire("allreduce_overhead", dict(m, allreduce_ms_per_step=30.0))
    assert f is not None and f.severity == "warning"
    assert "30.0 ms per step, 2.0x the 15 ms" in f.message
    assert "25,000,000 float32 gradients over 4 replicas needs at 10 GB/s" in f.message
    assert f.impact_pct == pytest.approx(100 * (30.0 - 15.0) / 75.0)  # the excess, % of the step: 20 %
    # never more than the collective time not hidden behind compute
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=30.0, collective_exposed_pct=12.0)).impact_pct \
        == pytest.approx(12.0)
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=22.6)) is not None
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=22.5)) is None  # not above 1.5x
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=16.0)) is None


def test_allreduce_eight_replicas_by_hand():
    # 100 M params = 400 MB; 25 GB/s: 16 ms; ring over 8: 16 x 14 / 8 = 28 ms; threshold 42 ms.
    m = dict(AR, param_count=100_000_000, link_bandwidth_gbps=25.0, replicas=8)
    f = fire("allreduce_overhead", dict(m, allreduce_ms_per_step=56.0))
    assert f is not None and "2.0x the 28 ms" in f.message
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=42.0)) is None
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=42.1)) is not None


def test_allreduce_without_replica_count_uses_the_plain_formula():
    # 25 M params at 10 GB/s: 10 ms; threshold 15 ms.
    m = dict(AR, param_count=25_000_000, link_bandwidth_gbps=10.0, step_time_mean_ms=40.0)
    f = fire("allreduce_overhead", dict(m, allreduce_ms_per_step=16.0))
    assert f is not None and f.severity == "warning"
    assert "1.6x the 10 ms" in f.message and "--replicas" in f.message
    assert f.impact_pct == pytest.approx(100 * (16.0 - 10.0) / 40.0)
    assert fire("allreduce_overhead", dict(m, allreduce_ms_per_step=15.0)) is None


def test_allreduce_with_one_replica_never_fires_on_the_formula():
    m = dict(AR, param_count=25_000_000, link_bandwidth_gbps=10.0, replicas=1, allreduce_ms_per_step=500.0)
    assert fire("allreduce_overhead", m) is None


def test_allreduce_without_params_or_bandwidth_asks_for_them():
    for missing in ("param_count", "link_bandwidth_gbps"):
        m = dict(AR, param_count=25_000_000, link_bandwidth_gbps=10.0, replicas=4, allreduce_ms_per_step=30.0)
        m[missing] = None
        f = fire("allreduce_overhead", m)
        assert f is not None and f.severity == "info", missing
        assert "cannot" in f.title
        assert "--params" in f.fix and "--bandwidth" in f.fix and "metadata" in f.fix
        assert "x" not in f.message.split("per step")[0]  # no ratio is invented
        assert f.impact_pct is None  # nothing known to be recoverable: the share is allreduce_share's
    # with a straggler named, the AllReduce time is the others waiting for it: no request for figures
    assert fire("allreduce_overhead", dict(AR, allreduce_ms_per_step=40.0, straggler_host="host2")) is None
    m = dict(AR, step_collective_pct=4.0, allreduce_ms_per_step=2.0)
    assert fire("allreduce_overhead", m) is None  # a small share is not worth asking about
    assert fire("allreduce_overhead", {"allreduce_present": False, "step_collective_pct": 50.0}) is None


# --------------------------------------------------------------------------- the engine


def test_findings_ordered_by_severity_then_impact():
    metrics = {**STEP, "input_pct": 30.0, "eager_pct": 15.0, "eager_op_count": 500, "idle_between_steps_pct": 12.0,
               "python_overhead_pct": 25.0, "retrace_count": 0, "step_outliers_count": 1,
               "step_outlier_max_ratio": 1.6}
    findings = evaluate(metrics, load_rules())
    got = [(f.rule, f.severity) for f in findings]
    assert got[0] == ("input_bound", "critical")
    assert [r for r, _ in got] == ["input_bound", "eager_execution", "step_gaps", "step_outliers"]
    warnings = [f for f in findings if f.severity == "warning"]
    # two warnings whose impacts differ, so the order is tested, not vacuous
    assert [(f.rule, f.impact_pct) for f in warnings] == [("eager_execution", 40.0), ("step_gaps", 12.0)]


def test_no_metrics_no_findings():
    assert evaluate({}, load_rules()) == []
    assert evaluate({name: None for name in RULES}, load_rules()) == []


def test_finding_to_dict():
    f = fire("eager_execution", {**STEP, "eager_pct": 85.0, "eager_op_count": 2980})
    d = f.to_dict()
    assert set(d) == {"rule", "severity", "title", "message", "impact_pct", "evidence", "fix", "why", "docs",
                      "marks", "scope", "plots", "lanes", "node", "node_pct", "also", "caveats"}
    # what its rule declares
    assert (d["marks"], d["scope"], d["plots"], d["lanes"]) == (["eager"], "run", ["steps"], ["python", "steps"])
    assert d["docs"] and all(u.startswith("https://") for u in d["docs"])
    assert d["evidence"]["eager_op_count"] == 2980


def test_severity_at_least():
    assert severity_at_least("critical", "warning")
    assert severity_at_least("warning", "warning")
    assert not severity_at_least("info", "warning")
    assert severity_at_least("critical", "critical")
    assert not severity_at_least("warning", "critical")
    with pytest.raises(ValueError):
        severity_at_least("critical", "fatal")
