"""Capture a real pair whose cost is outside the training steps (evaluation), with the whole run's wall-clock truth.

- ``run_validate_every_epoch``: Keras 3 ``model.fit`` of an MLP over 10 training batches per epoch, 16 epochs,
  evaluating at every epoch end over a validation set of :data:`VAL_BATCHES` batches (``validation_freq=1``, the
  default).
- ``run_validate_every_5th``: the same with ``validation_freq=5``: the fix the ``outside_evaluation`` rule gives.

Both are profiled by ``AdvisorCallback(steps=WINDOW)``: steps 25-44, from the middle of epoch 2 across two epoch
ends (the first run evaluates at both, the twin at neither); the callback's plain clock times the other steps. The
script's own clock (``time.perf_counter`` at each epoch's start and at the end of ``fit``) gives the whole run's
wall time per training step, evaluation included, over epochs 1-15 (epoch 0 traces the step functions): the pair's
figure (``pair``: ``problem_step_ms`` / ``twin_step_ms``, ``pair_clock``). Its per-step clock
(``measured_step_ms``: each profiled step from its start to the next one's, or to its own end before an epoch end)
is the step time's truth.

Each case is captured ``--reps`` times, the two interleaved; the sample kept is the repetition whose pair ratio is
the median (``reps``: every repetition's figures, their spread is the pair's noise).

Usage: ``python make_whole_run_samples.py OUT [--reps 3] [--finalize]`` (``--finalize``: only rewrite expected.toml
from the measured.json in OUT).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_op_samples import fit_setup, non_finite_stats, write_measured  # noqa: E402

PAIRS = {"run_validate_every_epoch": "run_validate_every_5th"}
#: training batches per epoch, epochs, validation batches, batch size, the profiled window
TRAIN_BATCHES, EPOCHS, VAL_BATCHES, BATCH = 10, 16, 300, 64
WINDOW = (25, 45)
FREQ = {"run_validate_every_epoch": 1, "run_validate_every_5th": 5}

CLOCK = ("time.perf_counter in a Keras callback after AdvisorCallback: each profiled step from its "
         "on_train_batch_begin to the next one's, or to its own on_train_batch_end before an epoch end (where the "
         "steps analysis ends it); wall clock per training step")
PAIR_CLOCK = ("time.perf_counter at on_epoch_begin of epoch 1 and at on_train_end: the whole run's wall time per "
              "training step over epochs 1-15, evaluation, epoch ends and the profiled window included")


def run_case(name: str, out: Path) -> dict:
    import keras
    import numpy as np

    import tfadvisor.keras

    width, depth, in_dim = 768, 2, 128
    x, y, model = fit_setup(keras, TRAIN_BATCHES * BATCH, width, depth, in_dim)
    rng = np.random.default_rng(1)
    vx = rng.random((VAL_BATCHES * BATCH, in_dim), dtype=np.float32)
    vy = rng.integers(0, 10, VAL_BATCHES * BATCH)
    marks: dict = {"begin": [], "end": [], "epoch_begin": {}, "train_end": 0.0}

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            marks["epoch_begin"][epoch] = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            marks["begin"].append(time.perf_counter())

        def on_train_batch_end(self, batch, logs=None):
            marks["end"].append(time.perf_counter())

        def on_train_end(self, logs=None):
            marks["train_end"] = time.perf_counter()

    logdir = out / name
    cb = tfadvisor.keras.AdvisorCallback(str(logdir), steps=WINDOW, analyze=False)
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, shuffle=False, validation_data=(vx, vy),
              validation_freq=FREQ[name], callbacks=[cb, Clock()])
    meta = json.loads(next(logdir.rglob("tfadvisor_run.json")).read_text())
    first, stop = meta["steps"]["start"], meta["steps"]["stop"]
    per = []
    for i in range(first, stop):
        epoch_end = (i + 1) % TRAIN_BATCHES == 0
        until = marks["end"][i] if epoch_end or i + 1 >= len(marks["begin"]) else marks["begin"][i + 1]
        per.append(round((until - marks["begin"][i]) * 1e3, 4))
    whole = (marks["train_end"] - marks["epoch_begin"][1]) * 1e3 / ((EPOCHS - 1) * TRAIN_BATCHES)
    desc = (f"Keras 3 model.fit of an MLP {in_dim}-" + "-".join([str(width)] * depth) + f"-10, batch {BATCH}, Adam, "
            f"{TRAIN_BATCHES} training batches per epoch, {EPOCHS} epochs, validation_data of {VAL_BATCHES} batches "
            f"evaluated with validation_freq={FREQ[name]}; tfadvisor.keras.AdvisorCallback(steps={WINDOW}) "
            f"(steps {first}-{stop - 1}, across the epoch ends after steps 29 and 39)")
    return {"description": desc, "batch_size": BATCH, "steps_per_execution": 1, "train_steps": stop - first,
            "measured_step_ms": per, "capture_api": "tfadvisor_callback",
            "whole_run_ms_per_step": round(whole, 4), "pair_clock": PAIR_CLOCK, "validation_freq": FREQ[name]}


def write_expected(out: Path, name: str) -> None:
    """``expected.toml`` of a captured case from its measured.json (the pair's figures from the problem's)."""
    import tomllib
    from make_op_samples import stats_mean

    def v(x) -> str:
        return json.dumps(x)

    problem, twin = next(iter(PAIRS.items()))
    m = json.loads((out / name / "measured.json").read_text())
    pair = json.loads((out / problem / "measured.json").read_text()).get("pair")
    desc = m["description"] + (". measured_step_ms: the script's own time.perf_counter per profiled step (start to "
                               "the next start, or to its end before an epoch end); measured.json pair: the whole "
                               "run's wall time per training step, evaluation included (pair.clock).")
    lines = ["# Planted truth for this captured sample; written by sample_traces/make_whole_run_samples.py from its "
             "measured.json", "# (captured on this project's 2-core CPU, TF defaults on). Planted cost: evaluation at "
             "every epoch end, outside the training steps.", f"description = {v(desc)}", 'kind = "captured"',
             f"capture_api = {v(m['capture_api'])}", f"tf_version = {v(m['tf_version'])}",
             f"keras_version = {v(m['keras_version'])}", "hosts = 1"]
    if name == problem:
        lines.append(f"fixed_by = {v(twin)}")
    nan = non_finite_stats(out / name)
    if nan:  # TF 2.21 writes MemoryAllocation fragmentation = nan now and then: the reader ignores them, with a note
        lines.append(f"load_notes = {v([f'{nan} stat value(s) that are not finite numbers'])}")
    mean = stats_mean(m)
    lines += ["", "[truth]", f"steps = {len(m['measured_step_ms'])}",
              "# the script's own clock (measured.json, step_clock): its mean over the steps the statistics use, "
              "+-15 %", f"step_time_ms = {v([round(mean * 0.85, 3), round(mean * 1.15, 3)])}"]
    if name == problem:
        lines += ["# the planted cost: the whole run's wall time per training step, problem minus twin (measured.json: "
                  "pair)", f"planted_cost_ms = {v(float(pair['planted_cost_ms']))}",
                  f"planted_cost_pct = {v(float(pair['planted_cost_pct']))}", "", "[findings]",
                  'top = "outside_evaluation"', 'present = ["outside_evaluation"]', "absent = []"]
    else:
        lines += ["", "[findings]", "present = []", 'absent = ["outside_evaluation"]']
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)
    (out / name / "expected.toml").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--finalize", action="store_true")
    a = ap.parse_args()
    if a.finalize:
        for name in (*PAIRS, *PAIRS.values()):
            write_expected(a.out, name)
        return
    if a.one:
        write_measured(a.one, a.out, run_case(a.one, a.out), CLOCK)
        return
    problem, twin = next(iter(PAIRS.items()))
    reps = []
    for r in range(a.reps):
        got = {}
        for name in (problem, twin) if r % 2 == 0 else (twin, problem):  # interleaved, alternating order
            tmp = a.out / f".rep{r}"
            subprocess.run([sys.executable, __file__, str(tmp), "--one", name], check=True)
            got[name] = json.loads((tmp / name / "measured.json").read_text())
        p, t = got[problem]["whole_run_ms_per_step"], got[twin]["whole_run_ms_per_step"]
        reps.append({"rep": r, "problem_ms_per_step": p, "twin_ms_per_step": t, "ratio": round(p / t, 4)})
        print(f"rep {r}: {p:.2f} -> {t:.2f} ms per step, {p / t:.2f}x", flush=True)
    keep = sorted(reps, key=lambda x: x["ratio"])[len(reps) // 2]
    src = a.out / f".rep{keep['rep']}"
    for name in (problem, twin):
        shutil.rmtree(a.out / name, ignore_errors=True)
        shutil.move(str(src / name), str(a.out / name))
    for r in reps:
        shutil.rmtree(a.out / f".rep{r['rep']}", ignore_errors=True)
    m = json.loads((a.out / problem / "measured.json").read_text())
    p, t = keep["problem_ms_per_step"], keep["twin_ms_per_step"]
    ratios = sorted(r["ratio"] for r in reps)
    m["pair"] = {"closed": True, "problem": problem, "twin": twin, "problem_step_ms": p, "twin_step_ms": t,
                 "planted_cost_ms": round(p - t, 4), "planted_cost_pct": round(100 * (p - t) / p, 1),
                 "clock": PAIR_CLOCK, "reps": reps,
                 "noise": f"ratio over {len(reps)} interleaved repetitions: {ratios[0]:.2f}-{ratios[-1]:.2f}x"}
    (a.out / problem / "measured.json").write_text(json.dumps(m, indent=1) + "\n")
    for name in (problem, twin):
        write_expected(a.out, name)
    print(f"kept rep {keep['rep']}: {keep['ratio']:.2f}x (reps {ratios})")


if __name__ == "__main__":
    main()
