"""Stat values range-checked where they are loaded and converted (issue 54, part 1).

A valid file may give any stat any value. Fuzzing found ``inf`` in a tf.data ``batch_size`` reaching
``int(float(v))`` in ``tfdata_graph._value`` (OverflowError, "internal error"). Every stat the analyses
read now has what it holds written down (:mod:`tfadvisor.model.values`), the reader drops the values out
of range with a ``load:`` note (:mod:`tfadvisor.io.statcheck`), and the conversions never raise.

``test_hostile_stat_values_end_in_a_result`` gives every hostile value class of the fuzzer
(``fuzzlib.HOSTILE_VALUES``) to every stat the fuzzer knows on a few samples, in process: it fails on the
old ``_value`` (tf.data ``batch_size`` = inf).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import fuzzlib
import fuzzrun
import numpy as np
import pytest
from conftest import ROOT, SAMPLES, expected

from tfadvisor.analyses import event_stats
from tfadvisor.analyses.tfdata_graph import _value
from tfadvisor.errors import TraceError
from tfadvisor.io.reader import load
from tfadvisor.model.values import (
    EVENT_STATS,
    INT64_MAX,
    NEGATIVE,
    NOT_FINITE,
    PAST_INT64,
    PLANE_STATS,
    WRONG_TYPE,
    Expect,
    as_int,
    as_number,
    problem,
    to_int64,
)
from tfadvisor.proto import xplane_pb2 as pb

HOSTILE = [v for _, _, v in fuzzlib.HOSTILE_VALUES]


class _Opaque:
    """Not a number nor text (its repr is the same in every process: pytest-xdist compares test ids)."""

    def __repr__(self) -> str:
        return "opaque"


def _id(v: object) -> str:
    return repr(v)[:30]


# --------------------------------------------------------------------------- the conversions
@pytest.mark.parametrize("v", HOSTILE + [None, float("nan"), "  ", b"", [], {}, _Opaque(), True, 10**400, -(10**400)],
                         ids=_id)
def test_tfdata_value_never_raises(v):
    """The crash of the fuzz reproducer: ``_value(inf)`` raised OverflowError (and ``_value(10**400)``)."""
    got = _value(v)
    assert got == "" or (got.isdigit() and int(got) <= INT64_MAX)


@pytest.mark.parametrize(("v", "want"), [
    ("32", "32"), (32, "32"), (32.9, "32"), ("1e3", "1000"), (np.float64(8.0), "8"), (np.int64(4), "4"),
    (float("inf"), ""), ("inf", ""), ("-inf", ""), (float("nan"), ""), ("nan", ""), ("1e400", ""), (-1, ""),
    (2**63, ""), (2.0**63, ""), ("18446744073709551616", ""), ("abc", ""), (None, ""), (True, ""),
])
def test_tfdata_value(v, want):
    assert _value(v) == want


def test_as_number_and_as_int():
    for bad in (None, True, False, math.inf, -math.inf, math.nan, "inf", "nan", "1e400", "abc", "", b"\xff", [1],
                10**400, _Opaque()):
        assert as_number(bad) is None and as_int(bad) is None, bad
    assert as_number("12") == 12.0 and as_number(b" 1.5 ") == 1.5 and as_number(np.float32(2)) == 2.0
    assert as_number(-1, lo=0) is None and as_number(5, hi=4) is None and as_number(2**63) is None
    assert as_int(2**63 - 1) == INT64_MAX and as_int(2**63) is None and as_int(-(2**63)) == -(2**63)
    assert as_int(2.0**63) is None and as_int(-(2.0**63)) is None and as_int(9.2e18) == 9200000000000000000
    assert as_int("7") == 7 and as_int("7.9") == 7 and as_int(-7.9) == -7 and as_int(np.uint64(2**64 - 1)) is None
    assert as_int(-1, lo=0) is None and as_int(3, lo=0, hi=2) is None


def test_to_int64_never_overflows():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = to_int64([1e300, -1e300, math.nan, 2.0**63, 3.7, -3.7, math.inf])
    assert got.dtype == np.int64 and got.tolist()[2:] == [0, 2**63 - 1024, 3, -3, 2**63 - 1024]
    assert got[0] > 0 > got[1]


@pytest.mark.parametrize(("v", "expect", "want"), [
    (math.inf, "count", NOT_FINITE), (math.nan, "id", NOT_FINITE), ("-inf", "count", NOT_FINITE),
    (2**63, "count", PAST_INT64), (2.0**63, "id", PAST_INT64), ("18446744073709551616", "count", PAST_INT64),
    (1e308, "count", PAST_INT64), (-(2**63), "count", NEGATIVE), (-1, "count", NEGATIVE), (-0.5, "count", NEGATIVE),
    ("-1", "count", NEGATIVE), ("abc", "count", WRONG_TYPE), ("", "id", WRONG_TYPE), (b"\xff", "count", WRONG_TYPE),
    (3, "text", WRONG_TYPE), (0.5, "text", WRONG_TYPE), (True, "count", WRONG_TYPE),
    (None, "count", None), (0, "count", None), (INT64_MAX, "count", None), (2**64 - 1, "id", None),
    (-(2**63), "id", None), (-(2**63), "any", None), ("12", "count", None), ("unavailable", "tfdata", None),
    (-1, "tfdata", None), (-2, "tfdata", NEGATIVE), ("x", "text", None), (b"x", "text", None), (-5.5, "any", None),
])
def test_problem(v, expect, want):
    e = {"count": Expect("number", 0), "id": Expect("id"), "text": Expect("text"), "any": Expect("number", None),
         "tfdata": Expect("number", -1, ("unavailable",))}[expect]
    assert problem(v, e) == want


def test_every_stat_an_analysis_reads_says_what_it_holds():
    """A module that reads a new stat declares it (``EVENT_STATS``); it must say here what the stat holds, or its
    values go unchecked. Plane-level stats are found in the analyses' source (``stats.get("name")``)."""
    assert event_stats() <= set(EVENT_STATS), sorted(event_stats() - set(EVENT_STATS))
    plane_reads = set()
    for f in (ROOT / "tfadvisor").rglob("*.py"):
        plane_reads.update(re.findall(r"\bp\.stats(?:\.get\(|\[)\"(\w+)\"", f.read_text()))
    assert plane_reads and plane_reads <= set(PLANE_STATS), sorted(plane_reads - set(PLANE_STATS))
    assert set(EVENT_STATS) | set(PLANE_STATS) <= set(fuzzlib.KNOWN_STATS)  # the fuzzer knows each


# --------------------------------------------------------------------------- the check as the reader loads
SANE = [("int64", 5), ("double", 1.5), ("uint64", 7), ("str", "12"), ("str", "unavailable"), ("str", "true"),
        ("str", "name"), ("int64", 0), ("double", 0.0)]


def _value_of(field: str, v: object) -> object:
    return v.decode("utf-8", "replace") if field == "bytes" else v


def _hostile_space() -> tuple[bytes, list[tuple[str, str, object]]]:
    """One plane: per checked stat and per value (hostile and sane), one event holding it, and the same as an
    event-metadata stat and a plane stat. Returns the file and (stat, field, value) per event, in order."""
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    line = plane.lines.add(id=1, name="python", timestamp_ns=1000)
    values = [(f, v) for _, f, v in fuzzlib.HOSTILE_VALUES] + SANE
    cases = []
    for sid, name in enumerate(sorted(set(EVENT_STATS) | set(PLANE_STATS)), start=1):
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
        for field, v in values:
            mid = len(plane.event_metadata) + 1
            plane.event_metadata[mid].id = mid
            plane.event_metadata[mid].name = f"ev{mid}"
            e = line.events.add(metadata_id=mid, offset_ps=len(cases) * 10, duration_ps=5)
            fuzzlib.set_stat(e.stats.add(metadata_id=sid), field, v)
            fuzzlib.set_stat(plane.event_metadata[mid].stats.add(metadata_id=sid), field, v)
            cases.append((name, field, v))
    return space.SerializeToString(), cases


def test_reader_drops_exactly_the_values_out_of_range(tmp_path):
    """Each value of each checked stat, at event and metadata level, is dropped exactly where :func:`problem` says it
    is wrong (the vectorised check agrees with the scalar one), with a ``load:`` note per kind of problem."""
    data, cases = _hostile_space()
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(data)
    trace = load(str(f))
    (p,) = trace.planes
    want_drop = [problem(_value_of(fld, v), EVENT_STATS.get(n) or PLANE_STATS[n]) is not None
                 if n in EVENT_STATS else False for n, fld, v in cases]
    kept_event = np.zeros(len(cases), bool)
    kept_event[p.st_event] = True
    kept_meta = np.zeros(len(cases), bool)
    kept_meta[p.meta_stats["meta"]] = True
    wrong = [(c, w) for c, w, k in zip(cases, want_drop, kept_event) if w == k]
    assert not wrong, wrong[:10]
    assert (kept_meta == kept_event).all()
    assert 0 < sum(want_drop) < len(cases)
    notes = trace.load_notes["h"]
    for what in ("not finite numbers", "past int64", "negative stat value", "of the wrong type"):
        assert any(n.startswith(tuple("0123456789")) and what in n and n.endswith(": ignored") for n in notes), notes


def test_reader_drops_plane_stats_out_of_range(tmp_path):
    space = pb.XSpace()
    plane = space.planes.add(id=1, name="/device:GPU:0")
    plane.lines.add(id=1, name="Stream #1").events.add(metadata_id=1, duration_ps=10)
    plane.event_metadata[1].id = 1
    given = {"memory_size": ("double", math.inf), "core_count": ("int64", -4), "clock_rate": ("uint64", 2**64 - 1),
             "compute_cap_major": ("str", "abc"), "device_vendor": ("double", 1.0), "memory_bandwidth": ("int64", 9),
             "compute_cap_minor": ("str", "5"), "unchecked_stat": ("double", math.nan)}
    for sid, (name, (field, v)) in enumerate(given.items(), start=1):
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
        fuzzlib.set_stat(plane.stats.add(metadata_id=sid), field, v)
    f = tmp_path / "g.xplane.pb"
    f.write_bytes(space.SerializeToString())
    trace = load(str(f))
    stats = trace.planes[0].stats
    assert set(stats) == {"memory_bandwidth", "compute_cap_minor", "unchecked_stat"}
    assert " ".join(trace.load_notes["g"]).count("ignored") == 4, trace.load_notes


def test_sane_profiles_are_untouched():
    """No sample's stat value is dropped (their reports stay as tests/output_digests.json holds them), but those its
    expected.toml declares (``load_notes``: TF 2.21 writes ``MemoryAllocation fragmentation = nan``, which a reader
    must drop: comp_metric_auc, comp_mixed_precision_cpu_tuned)."""
    runs = sorted({f.parent for f in SAMPLES.rglob("*.xplane.pb") if "bad_input" not in f.parts})
    assert len(runs) > 50
    for run in runs:
        sample = next((SAMPLES / part for part in run.relative_to(SAMPLES).parts[:1]), run)
        declared = expected(sample).get("load_notes", []) if (sample / "expected.toml").exists() else []
        for stats in (event_stats(), None):
            trace = load(str(run), stats=stats)
            dropped = [n for ns in trace.load_notes.values() for n in ns if "stat value" in n]
            assert not [n for n in dropped if not any(d in n for d in declared)], run


# --------------------------------------------------------------------------- hostile values through the analyses
#: Small samples that hold, between them, the stats of every analysis that reads stats: tf.data's iterator stats,
#: memory allocations, step markers and tf.function calls, a GPU plane's capabilities and XLA ops.
SWEEP_SAMPLES = ("tfdata_vectorizable_map_tuned", "keras_fit_spe1", "retracing", "real_jax_rocm_mi300_gemm")
#: ``full``: every hostile class given to each stat alone (about 1,000 analyses, minutes); by default each class
#: is given to all the stats at once, twice (the class's values taken in turn across the stats): 48 analyses.
FULL = os.environ.get("TFADVISOR_STAT_SWEEP") == "full"


def _sweep_cases(sample: str, full: bool = FULL) -> list[dict[str, tuple[str, object]]]:
    """Per analysis: {stat: (field, value)} to give every value of those stats of ``sample``. Each stat tfadvisor
    reads that the sample holds gets a value of each hostile class (``fuzzlib.HOSTILE_VALUES``), the class's values
    taken in turn across the stats so that each is used."""
    space = pb.XSpace.FromString(next((SAMPLES / sample).rglob("*.xplane.pb")).read_bytes())
    read = set(EVENT_STATS) | set(PLANE_STATS)
    names = sorted({m.name for p in space.planes for m in p.stat_metadata.values()} & read)
    out = []
    for cls in fuzzlib.HOSTILE_CLASSES:
        vals = {name: fuzzlib.hostile_values_for(name, cls) for name in names}
        if full:
            out.extend({name: vals[name][i % len(vals[name])]} for i, name in enumerate(names))
        else:
            out.extend({name: vals[name][(i + turn) % len(vals[name])] for i, name in enumerate(names)}
                       for turn in (0, 1))
    return out


def _nonfinite(token: str):
    raise AssertionError(f"non-finite number {token} in the JSON")


def _analyse_hostile(sample: str, given: dict[str, tuple[str, object]], tmp_path: Path) -> str | None:
    """``sample`` with every value of the stats in ``given`` replaced, analysed in process: what went wrong, or None
    (a result with sane JSON, no warning and a ``load:`` note where a value was out of range; or a TraceError)."""
    from tfadvisor.api import analyze
    from tfadvisor.report.terminal import print_result

    original = next((SAMPLES / sample).rglob("*.xplane.pb"))
    space = pb.XSpace.FromString(original.read_bytes())
    for plane in space.planes:
        for name, (field, v) in given.items():
            for s in fuzzlib.stats_named(plane, name):
                fuzzlib.set_stat(s, field, v)
    run = tmp_path / "plugins" / "profile" / "r"
    run.mkdir(parents=True, exist_ok=True)
    (run / original.name).write_bytes(space.SerializeToString())
    what = ", ".join(f"{n} = {f} {v!r}" for n, (f, v) in list(given.items())[:4]) + (" ..." if len(given) > 4 else "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a numpy warning is a line on the user's stderr
            with redirect_stdout(io.StringIO()):
                result = analyze(tmp_path)
                doc = json.loads(json.dumps(result.to_dict(), default=str), parse_constant=_nonfinite)
                print_result(result)
    except TraceError:
        return None
    except Exception as err:  # noqa: BLE001 - every other exception is the failure under test
        return f"{sample}: {what}: {type(err).__name__}: {err}"
    bad = fuzzrun.json_problems(doc)
    if bad:
        return f"{sample}: {what}: {bad[:3]}"
    out_of_range = [n for n, (f, v) in given.items() if n in EVENT_STATS
                    and problem(_value_of(f, v), EVENT_STATS[n]) is not None]
    if out_of_range and not any(n.startswith("load: ") and "stat value" in n for n in doc["notes"]):
        return f"{sample}: {what}: no load: note for {out_of_range[:3]}"
    return None


@pytest.mark.parametrize("sample", SWEEP_SAMPLES)
def test_hostile_stat_values_end_in_a_result(sample, tmp_path):
    """Every hostile value class (``fuzzlib.HOSTILE_VALUES``) given to the stats tfadvisor reads that a sample holds:
    the analysis ends in a result with sane JSON and no warning, or a TraceError; never another exception. Fails on
    the old ``tfdata_graph._value`` with the old reader (tf.data's batch_size = inf: OverflowError)."""
    failures = [f for i, given in enumerate(_sweep_cases(sample))
                if (f := _analyse_hostile(sample, given, tmp_path / str(i))) is not None]
    assert not failures, failures[:10]


def test_fuzz_reproducer_tfdata_stat_inf(tmp_path):
    """The fuzz case itself (``../shared/fuzz_cases/overflowerror_tfdata_stat_inf``), in process: a result whose notes
    say which values were ignored. ``test_fuzz_cases`` runs it through the CLI."""
    from tfadvisor.api import analyze

    case = Path(__file__).resolve().parent / "data" / "fuzz_cases" / "overflowerror_tfdata_stat_inf" / "logdir"
    doc = analyze(case).to_dict()
    notes = [n for n in doc["notes"] if n.startswith("load: ")]
    assert any("not finite numbers" in n and "batch_size = inf" in n for n in notes), notes
