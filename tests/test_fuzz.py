"""Fuzz test: a few hundred hostile variants of the sample traces through the real CLI.

Only a result (exit 0, sane JSON) or the documented TraceError (exit 2, one line naming the file) may
come out: no crash, hang, other exception, stderr noise, NaN/inf, percentage outside 0..100, negative
time, write into the logdir, or different output on a second run. Fixed seed, so a failure reproduces
with ``python benchmarks/fuzz.py --seed SEED --only INDEX``. ``benchmarks/fuzz.py`` runs 10,000+.
"""

from __future__ import annotations

import os

import fuzzlib
import fuzzrun

SEED = 20260112
N = int(os.environ.get("TFADVISOR_FUZZ_N", "300"))


def test_fuzz_inputs_end_as_result_or_trace_error(tmp_path):
    report = fuzzrun.run_fuzz(SEED, range(N), jobs=2, timeout=30.0, slow_s=15.0, repeat_every=10,
                              out_dir=tmp_path / "failures")
    summary = report.summary(examples=2)
    print(summary)
    assert len(report.outcomes) >= N
    assert not report.failures, (
        f"{len(report.failures)} fuzz failures; reproduce with `python benchmarks/fuzz.py --seed {SEED} --only "
        f"{' '.join(str(o.index) for o in report.failures[:10])}`\n{summary}"
    )
    assert report.repeats >= N // 10 and report.repeats_identical == report.repeats


def test_generator_is_deterministic_and_varied():
    seeds = fuzzlib.load_seeds()
    assert len(seeds) >= 20 and any(s.name.startswith("real_") for s in seeds)
    a = [fuzzlib.make_input(seeds, SEED, i) for i in range(40)]
    b = [fuzzlib.make_input(seeds, SEED, i) for i in range(40)]
    assert [(x.files, x.run_json, x.steps) for x in a] == [(x.files, x.run_json, x.steps) for x in b]
    assert {x.family for x in a} >= {"struct", "bytes", "runjson", "multihost"}
    originals = {d for s in seeds for _, d in s.files}
    assert sum(all(d not in originals for _, d in x.files) for x in a) >= 30  # inputs really differ from the seeds


def test_classifier_flags_bad_json_values():
    doc = {"units": {"idle_pct": "%", "gap_max_ms": "ms"},
           "metrics": {"idle_pct": 200.0, "gap_max_ms": -3.0, "x": float("nan")},
           "summary": {"breakdown_pct": {"input": 101.0}, "step_time_ms": {"min": -1.0}},
           "findings": [{"rule": "r", "title": "t", "message": "nan % of step time"}]}
    probs = " ".join(fuzzrun.json_problems(doc))
    for needle in ("pct:.metrics.idle_pct", "negative:.metrics.gap_max_ms", "nonfinite:.metrics.x",
                   "pct:.summary.breakdown_pct.input", "negative:.summary.step_time_ms.min", "nan-text"):
        assert needle in probs
    assert fuzzrun.json_problems({"metrics": {"idle_pct": 100.0, "gap_max_ms": 0.0}, "findings": []}) == []


def test_generator_gives_every_known_stat_every_hostile_value_class():
    """``m_hostile_stat`` (issue 54): non-finite doubles, int64 extremes, uint64 past int64, negative sizes and counts,
    text where a number belongs and a number where text does, for every stat the fuzzer knows (every stat tfadvisor
    reads among them); and the mutations really give them."""
    from tfadvisor.model.values import EVENT_STATS, PLANE_STATS
    from tfadvisor.proto import xplane_pb2 as pb

    values = fuzzlib.HOSTILE_VALUES
    assert set(fuzzlib.HOSTILE_CLASSES) == {"nonfinite", "int64_extreme", "past_int64", "negative", "text_for_number",
                                            "number_for_text"}
    assert {repr(v) for c, f, v in values if c == "nonfinite" and f == "double"} == {"inf", "-inf", "nan"}
    assert any(f == "uint64" and v == 2**64 - 1 for _, f, v in values)
    assert any(f == "int64" and v == -(2**63) for _, f, v in values) and any(v == 2**63 - 1 for _, _, v in values)
    assert any(f == "str" and v == "inf" for _, f, v in values) and any(f == "str" and v == "abc" for _, f, v in values)
    assert set(EVENT_STATS) | set(PLANE_STATS) <= set(fuzzlib.KNOWN_STATS)
    for name in fuzzlib.KNOWN_STATS:
        for cls in fuzzlib.HOSTILE_CLASSES:
            got = fuzzlib.hostile_values_for(name, cls)
            assert got and all(isinstance(f, str) for f, _ in got), (name, cls)
    space0 = pb.XSpace.FromString(next((fuzzlib.SAMPLES / "tfdata_vectorizable_map_tuned").rglob("*.xplane.pb"))
                                  .read_bytes())
    seen_classes, seen_stats = set(), set()
    for i in range(200):
        space = pb.XSpace()
        space.CopyFrom(space0)
        step = fuzzlib.m_hostile_stat(fuzzlib.random.Random(f"hostile:{i}"), space)
        seen_classes.update(c for c in fuzzlib.HOSTILE_CLASSES if f"({c})" in step)
        seen_stats.update(n for n in fuzzlib.KNOWN_STATS if f": {n} = " in step)
    assert seen_classes == set(fuzzlib.HOSTILE_CLASSES)
    assert {"batch_size", "parallelism", "name", "_p", "tracing_count"} <= seen_stats
