"""Every sample's and real trace's report is the one last accepted (``tests/outputs.py``), on any CPU: a change meant
to keep the answers (the reader's memory, the analyses' speed) leaves ``analyze --format json --tables`` and the
text report as they were, and numpy's vector dispatch (which orders equal keys its own way in a quicksort or a
partition) changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import cli_uses_shared_analysis, trace_dirs
from outputs import TESTS, changed, load, parts, report, reports, target_name

ACCEPTED = load()


@pytest.mark.parametrize("d", trace_dirs(), ids=target_name)
def test_report_unchanged(d):
    name = target_name(d)
    assert name in ACCEPTED, f"{name}: no accepted report; run `python tests/outputs.py` and review what it prints"
    with cli_uses_shared_analysis():  # the command line's plain call answered by the shared analysis (conftest)
        diff = changed(ACCEPTED[name], parts(*reports(d)))
    assert not diff, (f"{name}: these parts of the report changed: {', '.join(diff)}. If the change of the answers "
                      "is meant, accept it with `python tests/outputs.py` (it prints every trace's changed parts)")


#: The big sets' path on every trace: every set of event rows kept as its rows (:mod:`tfadvisor.spans.rowsets`),
#: read in chunks of 7 rows with its 3 longest rows apart, as a big trace's are (more than 4 M rows, chunks of 512K):
#: the chunks' seams, the long rows' reach and the threads' runs all fall inside these small traces.
ROWS_PATH = {("rowsets", "ROWSET_MIN_ROWS"): 0, ("rowsets", "LINE_SET_CODE_MIN"): 0,
             ("intervals", "CHUNK_ROWS"): 7, ("rowsets", "LONG_ROWS"): 3}


@pytest.mark.parametrize("d", trace_dirs(), ids=target_name)
def test_report_unchanged_with_sets_kept_as_rows(d, monkeypatch):
    import tfadvisor.spans.intervals as intervals
    import tfadvisor.spans.rowsets as rowsets

    for (mod, k), v in ROWS_PATH.items():
        monkeypatch.setattr({"intervals": intervals, "rowsets": rowsets}[mod], k, v)
    name = target_name(d)
    diff = changed(ACCEPTED[name], parts(report(d)))
    assert not diff, f"{name}: with the sets kept as rows these parts of the report changed: {', '.join(diff)}"


def narrowings() -> list[tuple[str, str]]:
    """numpy's dispatch narrowed as on older CPUs: every target above the oldest this CPU runs left out (on x86
    with AVX-512: as a CPU with AVX2 alone), then every dispatched target (the build's baseline: SSE4.2 on
    x86-64, NEON on ARM). Empty where numpy dispatches nothing above its baseline here."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    ran = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    if not ran:
        return []
    top = [f for f in __cpu_dispatch__ if f not in ran[:1]] if len(ran) > 1 else []
    out = [("without " + " ".join(ran[1:]), " ".join(top))] if top else []
    return out + [("baseline only", " ".join(__cpu_dispatch__))]


def test_narrowings_leave_out_what_this_cpu_runs():
    """The check below is a check here: on this CPU numpy dispatches above its baseline, and the narrowed dispatch
    really runs less (the feature reads as off in a process started with it)."""
    assert narrowings(), f"numpy {np.__version__} dispatches nothing above its baseline on this CPU"
    for label, off in narrowings():
        code = ("from numpy._core._multiarray_umath import __cpu_features__ as f; "
                f"print(' '.join(k for k in {off.split()!r} if f.get(k)))")
        got = subprocess.run([sys.executable, "-c", code], env={**os.environ, "NPY_DISABLE_CPU_FEATURES": off},
                             capture_output=True, text=True, check=True).stdout.split()
        assert got == [], f"{label}: still on: {got}"


def test_reports_the_same_with_vector_dispatch_narrowed():
    """Every trace's JSON and text report, in processes whose numpy runs the older CPUs' sort and partition paths
    (and another string hash seed), equal the accepted ones: no ordering rests on the order a vector unit leaves
    equal keys in, nor on a set's hash order. The two narrowings run side by side (2 cores: ~25 s each)."""
    procs = []
    for i, (label, off) in enumerate(narrowings()):
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": off, "PYTHONHASHSEED": str(101 + i)}
        procs.append((label, subprocess.Popen([sys.executable, str(TESTS / "outputs.py"), "--check"], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for label, p in procs:
        out, _ = p.communicate(timeout=900)
        assert p.returncode == 0, f"numpy dispatch {label}:\n{out[-4000:]}"
