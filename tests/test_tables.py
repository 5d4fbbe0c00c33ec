"""``Tables``: a read gives a DataFrame, what was stored keeps its type, each table is built once."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tfadvisor.model.table import Table, Tables


def test_reading_builds_once_and_keeps_what_was_stored():
    calls = []

    def lazy():
        calls.append(1)
        return pd.DataFrame({"b": [1.0]})

    t = Tables({"a": Table({"x": np.arange(3)}), "lazy": lazy})
    first = t["a"]
    assert isinstance(first, pd.DataFrame) and first["x"].tolist() == [0, 1, 2]
    assert t["a"] is first  # built once
    assert isinstance(t.raw("a"), Table)  # the stored entry is still the Table after the read
    t["lazy"], t["lazy"]
    assert calls == [1] and callable(t.raw("lazy"))


def test_a_function_may_build_a_table():
    """An analysis may store a function that builds a :class:`Table` (built when read): the read gives its
    DataFrame, the stored entry stays the function."""
    t = Tables({"lazy": lambda: Table({"x": np.arange(2), "n": np.array(["a", "b"], object)})})
    df = t["lazy"]
    assert isinstance(df, pd.DataFrame) and df["x"].tolist() == [0, 1] and df["n"].tolist() == ["a", "b"]
    assert callable(t.raw("lazy"))


def test_a_built_table_read_as_columns_without_pandas():
    """``Tables.table``: what a function builds, as the Table (no DataFrame made), built once; the DataFrame read
    later comes from that Table; a pickle keeps the built Table; a DataFrame entry has no Table."""
    import pickle

    calls = []

    def lazy():
        calls.append(1)
        return Table({"x": np.arange(3)})

    t = Tables({"lazy": lazy, "df": lambda: pd.DataFrame({"b": [1.0]})})
    first = t.table("lazy")
    assert isinstance(first, Table) and t.table("lazy") is first and "lazy" not in t._built
    assert t["lazy"]["x"].tolist() == [0, 1, 2] and calls == [1]
    assert t.table("df") is None
    back = pickle.loads(pickle.dumps(_read_first(lazy)))
    assert isinstance(back.raw("lazy"), Table) and back["lazy"]["x"].tolist() == [0, 1, 2]


def _read_first(fn) -> Tables:
    t = Tables({"lazy": fn})
    t.table("lazy")
    return t


def test_tables_pickle_with_their_built_frames():
    """A result's tables pickle (a notebook's cache) even when a table is made by a local function, once it was
    read; one never read stays the function and does not pickle."""
    import pickle

    t = Tables({"a": Table({"x": np.arange(3)}), "lazy": lambda: pd.DataFrame({"b": [1.0]})})
    t["lazy"]
    back = pickle.loads(pickle.dumps(t))
    assert back["lazy"]["b"].tolist() == [1.0] and back["a"]["x"].tolist() == [0, 1, 2]
    assert isinstance(back.raw("a"), Table)


def test_a_copy_shares_what_was_built_and_a_new_value_replaces_it():
    t = Tables({"a": Table({"x": np.arange(2)})})
    built = t["a"]
    copy = Tables(t)
    assert copy["a"] is built
    copy["a"] = Table({"x": np.arange(5)})
    assert len(copy["a"]) == 5 and len(t["a"]) == 2
    other = Tables({"a": Table({"x": np.arange(7)})})
    t.update_raw(other)
    assert len(t["a"]) == 7 and isinstance(t.raw("a"), Table)
    del t["a"]
    assert "a" not in t and len(t) == 0
