"""Tables as named numpy columns, and the mapping that turns them into pandas DataFrames on demand.

The reader and the analyses work on numpy arrays; pandas is imported only when somebody asks for a
table as a DataFrame (a notebook, ``--tables``, the HTML/Markdown reports, multi-host rendering). That
keeps pandas' import (a quarter of a second) off the path of ``tfadvisor analyze`` on a small trace.

* :class:`Table`: equal-length columns (``table["col"]`` is the numpy array; ``len(table)`` rows).
* :class:`Tables`: ``{name: DataFrame}`` for users; holds a :class:`Table`, a DataFrame, or a function
  returning one, and builds (once) the DataFrame of the name that is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


class Table:
    """Named columns of one length. ``table[col]`` is the column's numpy array (object dtype for text)."""

    __slots__ = ("_cols", "_n")

    def __init__(self, columns: Mapping[str, Any] | None = None, n: int | None = None):
        self._cols: dict[str, np.ndarray] = {}
        cols = {k: _column(v) for k, v in (columns or {}).items()}
        if n is None:  # the length of the first array column (a scalar fills its column)
            n = next((len(v) for v in cols.values() if v.ndim), None)
        self._n = n
        for k, v in cols.items():
            self[k] = v

    def __len__(self) -> int:
        return 0 if self._n is None else self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]

    def __setitem__(self, name: str, values: Any) -> None:
        arr = _column(values)
        if arr.ndim == 0:  # a scalar fills the column
            arr = np.full(len(self), arr.item(), dtype=object if arr.dtype.kind in "OUS" else arr.dtype)
        if self._n is None:
            self._n = len(arr)
        elif len(arr) != self._n:
            raise ValueError(f"column {name!r} has {len(arr)} rows, the table {self._n}")
        self._cols[name] = arr

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def take(self, rows: np.ndarray) -> Table:
        """The rows ``rows`` (indices or a boolean mask), every column."""
        out = Table()
        for k, v in self._cols.items():
            out[k] = v[rows]
        if not out._cols:
            out._n = int(np.count_nonzero(rows)) if np.asarray(rows).dtype == bool else len(rows)
        return out

    def sort(self, by: str, descending: bool = False) -> Table:
        """Rows ordered by column ``by`` (stable: ties keep their order)."""
        col = self[by]
        order = np.argsort(col, kind="stable")
        if descending:  # stable descending: reverse the ascending order of the reversed rows
            order = (len(col) - 1 - np.argsort(col[::-1], kind="stable"))[::-1]
        return self.take(order)

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as ``{column: value}``."""
        return {k: v[i] for k, v in self._cols.items()}

    @staticmethod
    def concat(parts: list[Table]) -> Table:
        """Rows of every part, in order (the parts have the same columns)."""
        if not parts:
            return Table()
        return Table({k: np.concatenate([p[k] for p in parts]) for k in parts[0].columns})

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        if not self._cols:
            return pd.DataFrame(index=range(len(self)))
        return pd.DataFrame(self._cols, columns=list(self._cols))

    def __repr__(self) -> str:
        return f"<Table {len(self)} rows: {', '.join(self._cols)}>"


def _column(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(object) if values.dtype.kind in "US" else values
    if isinstance(values, (list, tuple)):
        if any(isinstance(v, str) or v is None for v in values):
            arr = np.empty(len(values), dtype=object)
            arr[:] = values
            return arr
        return np.asarray(values)
    to_numpy = getattr(values, "to_numpy", None)  # a pandas Series handed in
    return to_numpy() if to_numpy is not None else np.asarray(values)


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes and uniques numbered by first appearance (as ``pandas.factorize``; no missing values)."""
    values = np.asarray(values)
    if values.shape[0] == 0:
        return np.empty(0, np.int64), values[:0]
    uniq, first, inv = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inv.reshape(-1)], uniq[order]


def group_last(codes: np.ndarray, n: int) -> np.ndarray:
    """Per code ``0..n-1``, the index of its last occurrence in ``codes`` (-1 where none)."""
    codes = np.asarray(codes, np.int64)
    out = np.full(n, -1, np.int64)
    if codes.shape[0]:
        uniq, first_rev = np.unique(codes[::-1], return_index=True)
        out[uniq] = codes.shape[0] - 1 - first_rev
    return out


def to_float(values: Any) -> np.ndarray:
    """Numbers from text or numbers, NaN where a value is not one (as ``pandas.to_numeric(errors=
    "coerce")``)."""

    def one(v: Any) -> float:
        try:
            return float(v)
        except (TypeError, ValueError):
            return np.nan

    return np.array([one(v) for v in values], np.float64)


def group_sum(codes: np.ndarray, values: np.ndarray, n: int | None = None) -> np.ndarray:
    """Sum of ``values`` per code ``0..n-1`` (float64)."""
    return np.bincount(codes, weights=np.asarray(values, np.float64), minlength=n or 0)


Lazy = Callable[[], "pd.DataFrame | None"]


class Tables(MutableMapping):
    """``{name: DataFrame}``, built on first read from a :class:`Table` or a function returning a DataFrame or a
    :class:`Table` (then kept).

    What was stored stays as it was (:meth:`raw` gives it: a :class:`Table`, a DataFrame or the
    function, whatever has been read); a read always gives a DataFrame (or the function's None)."""

    def __init__(self, items: Mapping[str, Any] | None = None):
        self._raw: dict[str, Any] = {}
        self._built: dict[str, Any] = {}
        self._made: dict[str, Any] = {}  # what the functions returned (a Table, before its DataFrame)
        if isinstance(items, Tables):
            self._raw.update(items._raw)
            self._built.update(items._built)
            self._made.update(items._made)
        elif items:
            self._raw.update(items)

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name in self._built:
            return self._built[name]
        v = self._stored(name)
        if isinstance(v, Table):
            v = v.to_pandas()
        self._built[name] = v
        return v

    def _stored(self, name: str) -> Any:
        """The entry as stored, or for a function what it returns (called once)."""
        v = self._raw[name]
        if not callable(v) or isinstance(v, Table):
            return v
        if name not in self._made:
            self._made[name] = v()
        return self._made[name]

    def table(self, name: str) -> Table | None:
        """The entry as numpy columns, without pandas: the stored :class:`Table`, or the one its function builds
        (built once); None where it is a DataFrame (or the function gives one)."""
        v = self._stored(name)
        return v if isinstance(v, Table) else None

    def __setitem__(self, name: str, value: Any) -> None:
        self._raw[name] = value
        self._built.pop(name, None)
        self._made.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._raw[name]
        self._built.pop(name, None)
        self._made.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def raw(self, name: str) -> Any:
        """The entry as stored (a :class:`Table`, a DataFrame, or the function), without building it."""
        return self._raw[name]

    def update_raw(self, other: Tables | Mapping[str, Any]) -> None:
        """Add ``other``'s entries as they are stored (nothing is built; what ``other`` built is kept)."""
        items = other._raw if isinstance(other, Tables) else other
        for name in items:
            self._built.pop(name, None)
            self._made.pop(name, None)
        self._raw.update(items)
        if isinstance(other, Tables):
            self._built.update(other._built)
            self._made.update(other._made)

    def __getstate__(self) -> dict[str, Any]:
        """What pickles: a built table as its frame (the function that made it may be a local lambda)."""
        raw = {k: self._built.get(k, self._made.get(k, v)) if callable(v) and not isinstance(v, Table) else v
               for k, v in self._raw.items()}
        return {"_raw": raw, "_built": dict(self._built)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._raw = state.get("_raw", {})
        self._built = state.get("_built", {})
        self._made = {}

    def __repr__(self) -> str:
        return f"<Tables: {', '.join(self._raw) or 'none'}>"


__all__ = ["Table", "Tables", "factorize", "group_last", "group_sum", "to_float"]
