"""Rule fixtures for rules/05_capture.toml and the step-based rules on a fragmentary capture, which hold there too
(with a caveat: tfadvisor.advice.explain) (imported by test_rule_fixtures.py: ``(rule id, metrics, expected severity
or None)``)."""

from __future__ import annotations

STEADY = dict(capture_steady_state=True, complete_steps=10)
FRAGMENT = dict(capture_steady_state=False, complete_steps=1, capture_issues="only 1 step in the window")
NO_STEPS = dict(capture_steady_state=False, complete_steps=0, capture_issues="no training steps in the window")
STEP = dict(steps_count=10, executions_count=10, step_time_mean_ms=20.0, step_time_median_ms=20.0)

CAPTURE_CASES = [
    # ---- capture_not_steady_state: the top finding on a fragment
    ("capture_not_steady_state", FRAGMENT, "critical"),
    ("capture_not_steady_state", {**FRAGMENT, "complete_steps": 2}, "critical"),  # edge: 2 steps
    ("capture_not_steady_state", {**FRAGMENT, "complete_steps": 3}, "warning"),  # enough steps, other issue
    ("capture_not_steady_state", STEADY, None),
    ("capture_not_steady_state", NO_STEPS, None),  # capture_no_steps says it
    ("capture_not_steady_state", {}, None),
    # ---- capture_no_steps
    ("capture_no_steps", NO_STEPS, "info"),
    ("capture_no_steps", FRAGMENT, None),
    ("capture_no_steps", {"complete_steps": 0}, None),  # steady state unknown: never fires
    # ---- devices_idle
    ("devices_idle", dict(devices_total=8, devices_active=2, devices_idle_count=6, devices_idle="GPU:0",
                          devices_active_list="GPU:4, GPU:6"), "info"),
    ("devices_idle", dict(devices_total=8, devices_active=8, devices_idle_count=0), None),
    ("devices_idle", dict(devices_total=1, devices_active=0, devices_idle_count=1), None),
    ("devices_idle", dict(devices_total=8, devices_active=0, devices_idle_count=8), None),  # nothing ran at all
    # ---- step-based verdicts hold on a steady window and on a fragment (there with a caveat, never withheld)
    ("input_bound", {**STEP, **STEADY, "input_pct": 30.0}, "critical"),
    ("input_bound", {**STEP, **FRAGMENT, "input_pct": 30.0}, "critical"),
    ("step_gaps", {**STEP, **FRAGMENT, "idle_between_steps_pct": 50.0}, "critical"),
    ("step_outliers", {**STEP, **FRAGMENT, "step_outliers_count": 3, "step_outlier_max_ratio": 3.0}, "info"),
    ("memory_headroom", dict(device_present=True, memory_capacity_bytes=16e9, memory_peak_pct=30.0, **STEADY), "info"),
    ("memory_headroom", dict(device_present=True, memory_capacity_bytes=16e9, memory_peak_pct=30.0, **NO_STEPS), None),
    # memory headroom needs a whole step: a fragment's peak says nothing of what a step needs
    ("memory_headroom", dict(device_present=True, memory_capacity_bytes=16e9, memory_peak_pct=30.0, **FRAGMENT), None),
    ("kernel_launch_bound", dict(device_present=True, kernel_launch_pct=20.0, **FRAGMENT), "critical"),
    ("python_overhead", {**STEP, **FRAGMENT, "python_overhead_pct": 60.0}, "critical"),
    # steps from a device's Steps line: the host dispatches ahead, its Python is off the critical path
    ("python_overhead", {**STEP, **STEADY, "python_overhead_pct": 60.0, "steps_source": "device_steps"}, None),
    ("python_overhead", {**STEP, **STEADY, "python_overhead_pct": 60.0, "steps_source": "trace_context"},
     "critical"),
    ("host_ops_with_device", dict(device_present=True, host_op_time_pct=40.0, **FRAGMENT), "warning"),
    ("h2d_pageable", dict(h2d_pageable_pct=90.0, h2d_exposed_pct=10.0, **FRAGMENT), "warning"),
    ("allreduce_share", dict(allreduce_present=True, allreduce_pct=30.0, allreduce_overlap_pct=0.0, **FRAGMENT), None),
]
