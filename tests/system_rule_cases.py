"""Rule fixtures for the system rules (rules/05_system_input.toml, rules/60_system.toml).

Imported by test_rule_fixtures.py into its CASES: (rule id, metrics, expected severity or None).
"""

from __future__ import annotations

STEP = dict(steps_count=40, step_time_mean_ms=20.0, step_time_median_ms=20.0)
IDLE_BOX = dict(system_cpu_util_pct=9.0, system_cpu_idle_cores=2, system_cpu_cores=2, system_disk_busy_pct=0.0,
                system_net_recv_mbps=0.0)
BUSY_CPU = dict(system_cpu_util_pct=97.0, system_cpu_cores=2, system_proc_cpu_pct=95.0, system_disk_busy_pct=0.0)

COMPUTE = dict(steps_count=40, step_time_mean_ms=27.0, step_device_compute_pct=88.0, op_matrix_pct=90.0,
               op_top_category="matrix", op_top_category_pct=90.0, device_present=False,
               op_top_ops="Conv2DBackpropFilter 38 %, Conv2DBackpropInput 32 %, FusedConv2D 20 %")

SYSTEM_CASES = [
    # ---- compute-bound: the largest op costs (rules/35_compute.toml)
    ("compute_bound_matrix", COMPUTE, "info"),
    ("compute_bound_matrix", {**COMPUTE, "step_device_compute_pct": 40.0}, None),  # the step waits, not computes
    ("compute_bound_matrix", {**COMPUTE, "capture_steady_state": False}, "info"),  # with a caveat, never none
    ("compute_bound_ops", {**COMPUTE, "op_top_category": "elementwise", "op_top_category_pct": 70.0,
                           "op_matrix_pct": 20.0}, "info"),
    ("compute_bound_ops", COMPUTE, None),  # matrix: the other rule
    # ---- no steps: where the op time goes
    ("op_time_dominant", {"steps_count": 0, "op_top_category": "data_movement", "op_top_category_pct": 96.6,
                          "op_source": "device", "op_time_ms": 315123.0, "op_top_ops": "copy-done 97 %"}, "warning"),
    ("op_time_dominant", {"steps_count": 0, "op_top_category": "matrix", "op_top_category_pct": 70.0,
                          "op_source": "device", "op_time_ms": 100.0, "op_top_ops": "convolution 70 %"}, "info"),
    ("op_time_dominant", {"steps_count": 12, "op_top_category": "matrix", "op_top_category_pct": 70.0}, None),

    # ---- preprocessing short of CPU: input wait + saturated CPU (the cross-check), or GPU low + CPU/disk high
    ("system_preprocessing_bound", {**STEP, **BUSY_CPU, "input_pct": 76.0}, "critical"),
    ("system_preprocessing_bound", {**STEP, **BUSY_CPU, "input_pct": 10.0}, "warning"),
    ("system_preprocessing_bound", {**STEP, **BUSY_CPU, "input_pct": 4.0}, None),  # no wait: busy but keeping up
    ("system_preprocessing_bound", {**STEP, **BUSY_CPU, "system_cpu_util_pct": 79.0, "input_pct": 50.0}, None),
    ("system_preprocessing_bound", {"system_gpu_util_pct": 20.0, "system_cpu_util_pct": 90.0}, "critical"),
    ("system_preprocessing_bound", {"system_gpu_util_pct": 20.0, "system_cpu_util_pct": 10.0,
                                    "system_disk_busy_pct": 95.0}, "critical"),
    ("system_preprocessing_bound", {"system_gpu_util_pct": 80.0, "system_cpu_util_pct": 90.0}, None),
    # another process takes the CPU: not the pipeline's fault (system_competing_load says it)
    ("system_preprocessing_bound", {**STEP, **BUSY_CPU, "system_proc_cpu_pct": 70.0, "system_other_cpu_pct": 27.0,
                                    "input_pct": 37.0}, None),
    # ---- a competing load on a saturated CPU (a shared machine)
    ("system_competing_load", {**STEP, **BUSY_CPU, "system_proc_cpu_pct": 70.0, "system_other_cpu_pct": 27.0},
     "info"),
    ("system_competing_load", {**STEP, **BUSY_CPU, "system_proc_cpu_pct": 54.0, "system_other_cpu_pct": 41.0},
     "info"),
    ("system_competing_load", {**STEP, **BUSY_CPU, "system_other_cpu_pct": 2.0}, None),  # this process is the load
    ("system_competing_load", {**STEP, "system_cpu_util_pct": 60.0, "system_proc_cpu_pct": 30.0,
                               "system_other_cpu_pct": 30.0}, None),  # cores to spare: no competition
    # ---- everything low but not zero -> more parallelism
    ("system_input_underused", {**STEP, **IDLE_BOX, "input_pct": 97.0}, "critical"),
    ("system_input_underused", {**STEP, **IDLE_BOX, "input_pct": 8.0}, "warning"),
    ("system_input_underused", {**STEP, **IDLE_BOX, "input_pct": 97.0, "system_cpu_util_pct": 0.0}, None),  # zero
    ("system_input_underused", {**STEP, **IDLE_BOX, "input_pct": 97.0, "system_disk_busy_pct": 90.0}, None),
    ("system_input_underused", {**STEP, **IDLE_BOX, "input_pct": 2.0}, None),
    ("system_input_underused", {**IDLE_BOX, "system_gpu_util_pct": 30.0}, "warning"),  # GPU low, no trace figure
    # ---- disk- and network-bound input
    ("system_input_disk_bound", {**STEP, "input_pct": 40.0, "system_disk_busy_pct": 98.0,
                                 "system_disk_read_mbps": 180.0, "system_cpu_util_pct": 20.0}, "critical"),
    ("system_input_disk_bound", {**STEP, "input_pct": 40.0, "system_disk_busy_pct": 50.0,
                                 "system_disk_read_mbps": 180.0, "system_cpu_util_pct": 20.0}, None),
    ("system_input_network_bound", {**STEP, "input_pct": 12.0, "system_net_recv_mbps": 300.0,
                                    "system_cpu_util_pct": 30.0}, "warning"),
    ("system_input_network_bound", {**STEP, "input_pct": 12.0, "system_net_recv_mbps": 10.0,
                                    "system_cpu_util_pct": 30.0}, None),
    # ---- start-up
    ("slow_startup", {"startup_to_first_step_s": 6.1, "startup_pct": 99.0, "startup_before_fit_s": 5.6,
                      "startup_before_fit_read_calls": 129_000, "startup_phase": "before_fit",
                      "startup_before_fit_read_mb": 85.0}, "critical"),  # half the job or more
    ("slow_startup", {"startup_to_first_step_s": 12.0, "startup_pct": 30.0, "startup_before_fit_s": 11.0,
                      "startup_before_fit_read_calls": 90_000, "startup_phase": "before_fit",
                      "startup_before_fit_read_mb": 60.0}, "warning"),
    ("slow_startup", {"startup_to_first_step_s": 7.0, "startup_pct": 91.0, "startup_before_fit_s": 6.4,
                      "startup_before_fit_read_calls": 9_005, "startup_phase": "before_fit"}, None),  # TF import only
    ("slow_startup", {"startup_to_first_step_s": 300.0, "startup_pct": 20.0, "startup_before_fit_s": 280.0,
                      "startup_phase": "before_fit", "startup_before_fit_cpu_pct": 5.0}, "warning"),
    ("slow_startup", {"startup_to_first_step_s": 70.0, "startup_pct": 1.0}, None),  # long job: start-up is noise
    # ---- memory, GPUs, cores
    ("host_memory_pressure", {"system_swap_io_mbps": 25.0, "system_mem_used_pct": 99.0}, "critical"),
    ("host_memory_pressure", {"system_rss_limit_pct": 91.0, "system_swap_io_mbps": 0.0}, "warning"),
    ("host_memory_pressure", {"system_rss_limit_pct": 40.0, "system_swap_io_mbps": 0.0,
                              "system_mem_used_pct": 50.0}, None),
    ("idle_gpus", {"system_gpu_count": 8, "system_gpu_idle_count": 7, "system_gpu_util_min_pct": 0.0,
                   "system_gpu_util_pct": 11.0}, "warning"),
    ("idle_gpus", {"system_gpu_count": 1, "system_gpu_idle_count": 1}, None),
    ("gpu_low_utilisation", {"system_gpu_util_pct": 35.0, "input_pct": 1.0, "system_gpu_idle_count": 0}, "warning"),
    ("gpu_low_utilisation", {"system_gpu_util_pct": 35.0, "input_pct": 30.0, "system_gpu_idle_count": 0}, None),
    ("cpu_cores_idle", {**STEP, "device_present": False, "system_cpu_cores": 32, "system_cpu_idle_cores": 28,
                        "system_cpu_idle_cores_pct": 87.5, "input_pct": 1.0}, "info"),
    ("cpu_cores_idle", {**STEP, "device_present": True, "system_cpu_cores": 32, "system_cpu_idle_cores": 28,
                        "system_cpu_idle_cores_pct": 87.5, "input_pct": 1.0}, None),
]
