"""Every sample's and real trace's report is the one last accepted (``tests/outputs.py``): a change meant to keep
the answers (the reader's memory, the analyses' speed) leaves ``analyze --format json --tables`` as it was."""

from __future__ import annotations

import pytest
from conftest import trace_dirs
from outputs import changed, load, parts, report, target_name

ACCEPTED = load()


@pytest.mark.parametrize("d", trace_dirs(), ids=target_name)
def test_report_unchanged(d):
    name = target_name(d)
    assert name in ACCEPTED, f"{name}: no accepted report; run `python tests/outputs.py` and review what it prints"
    diff = changed(ACCEPTED[name], parts(report(d)))
    assert not diff, (f"{name}: these parts of the report changed: {', '.join(diff)}. If the change of the answers "
                      "is meant, accept it with `python tests/outputs.py` (it prints every trace's changed parts)")


#: The big sets' path on every trace: every set of event rows kept as its rows (:mod:`tfadvisor.analyses.rowsets`),
#: read in chunks of 7 rows with its 3 longest rows apart, as a big trace's are (more than 4 M rows, chunks of 512K):
#: the chunks' seams, the long rows' reach and the threads' runs all fall inside these small traces.
ROWS_PATH = {("rowsets", "ROWSET_MIN_ROWS"): 0, ("rowsets", "LINE_SET_CODE_MIN"): 0,
             ("intervals", "CHUNK_ROWS"): 7, ("rowsets", "LONG_ROWS"): 3}


@pytest.mark.parametrize("d", trace_dirs(), ids=target_name)
def test_report_unchanged_with_sets_kept_as_rows(d, monkeypatch):
    import tfadvisor.analyses.intervals as intervals
    import tfadvisor.analyses.rowsets as rowsets

    for (mod, k), v in ROWS_PATH.items():
        monkeypatch.setattr({"intervals": intervals, "rowsets": rowsets}[mod], k, v)
    name = target_name(d)
    diff = changed(ACCEPTED[name], parts(report(d)))
    assert not diff, f"{name}: with the sets kept as rows these parts of the report changed: {', '.join(diff)}"
