"""Stage persistence: ``<run root>/<flow-run-id>/<stage>/*.parquet`` plus ``manifest.json``.

Every file is written atomically (a temp file in the same folder, fsync, then ``os.replace``), so a
killed run leaves either the old file or the new one, never a torn one. The manifest carries, per
file, the row count, the column schema and the SHA-256 of the bytes, plus the stage's *key*: a hash of
the stage name, its parameters, the hashes of its inputs and the code version. A later run with the
same key finds the manifest (in any run folder under the same root), verifies every file's hash and
copies the stage instead of recomputing it. A file whose bytes no longer match its manifest is never
read: ``read_table`` raises ``CorruptStageError`` and ``find_reusable`` skips that stage.

The stage contract, written once: a stage declares the files of earlier stages it reads (``Read``, a
module-level tuple beside its task), ``StageStore.inputs`` derives its input hashes from them, and
``StageStore.find_or_write`` adopts an identical earlier stage or calls the stage's ``compute`` and writes what
it returns (``StageOutput``). While ``compute`` runs, reading a stage file the stage did not declare raises
``UndeclaredReadError``, so an input cannot be forgotten silently.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST = "manifest.json"


def stage_manifests(run_root: str | Path, stage: str) -> list[Path]:
    """The manifest files of ``stage`` in every run folder under ``run_root`` (verified or not)."""
    return sorted(Path(run_root).glob(f"*/{stage}/{MANIFEST}"))


class CorruptStageError(RuntimeError):
    """A stage file does not match the hash recorded in its manifest."""


class UndeclaredReadError(RuntimeError):
    """A stage, while it computed, read a file of another stage that it does not declare (``Read``)."""


@dataclass(frozen=True)
class Read:
    """One file of an earlier stage that a stage reads; a stage declares every such file (e.g. ``READS`` beside
    its task), and ``StageStore.inputs`` derives the stage's input hashes from the declarations.

    ``key``: the name the file's SHA-256 takes in the stage's inputs, so a change of the file recomputes the
    stage; None for a file whose content the keyed inputs and the parameters already fix, ``why`` saying how.
    ``optional``: left out when this run has no such stage or file (the weights of a run without weighting)."""

    stage: str
    file: str
    key: str | None
    optional: bool = False
    why: str = ""

    def __post_init__(self) -> None:
        if self.key is None and not self.why:
            raise ValueError(f"the read of {self.stage}/{self.file} has no key: say why its content is fixed")


#: while a stage computes (``find_or_write``): its name and the (stage, file) pairs it declares
_COMPUTING: ContextVar[tuple[str, frozenset[tuple[str, str]]] | None] = ContextVar("shiftflow_computing",
                                                                                   default=None)


def _note_read(stage: str, name: str) -> None:
    """Refuse a read of ``stage``/``name`` by a computing stage that does not declare it (``Read``)."""
    computing = _COMPUTING.get()
    if computing is None or stage == computing[0] or (stage, name) in computing[1]:
        return
    raise UndeclaredReadError(f"stage {computing[0]!r} read {stage}/{name} without declaring it: add a Read for "
                              "it beside the task (its key in the stage's inputs, or why none is needed)")


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: errors of a full disk: no space, a file-size limit (``ulimit -f``, with SIGXFSZ ignored), a quota
_DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


class StageWriteError(OSError):
    """A stage file could not be written because the disk is full (or a file-size limit or quota is reached);
    ``errno`` is kept. Nothing half-written is left, and the stage's previous files and manifest are kept."""

    def __str__(self) -> str:
        return str(self.strerror)


def _write_temp(path: Path, write: Any) -> Path:
    """Write a temp file beside ``path`` (same folder), fsynced; returns its path. On failure nothing is left,
    and a full disk is raised as ``StageWriteError`` naming ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, StageWriteError) and exc.errno in _DISK_FULL:
            raise StageWriteError(exc.errno, f"cannot write {path}: {exc.strerror or exc} (the disk is full or a "
                                  "file-size limit is reached); nothing half-written is left and the previous "
                                  "files are kept: free space and rerun, finished stages are reused") from exc
        raise
    return Path(tmp)


def _atomic_write_bytes(path: Path, write: Any) -> None:
    tmp = _write_temp(path, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_parquet_atomic(df: pd.DataFrame, path: str | Path) -> str:
    """Write ``df`` (index dropped) as Parquet via temp file + rename; returns the file's SHA-256."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    _atomic_write_bytes(Path(path), lambda f: pq.write_table(table, f))
    return sha256_file(path)


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=str).encode()


def write_json_atomic(obj: Any, path: str | Path) -> None:
    data = _json_bytes(obj)
    _atomic_write_bytes(Path(path), lambda f: f.write(data))


def write_bytes_atomic(data: bytes, path: str | Path) -> None:
    _atomic_write_bytes(Path(path), lambda f: f.write(data))


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the shiftlib and tasks sources: a stage computed by other code is not reused."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pkg in ("shiftlib", "tasks"):
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def stage_key(stage: str, params: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """Key of a stage computation: stage name, parameters, input hashes and code version."""
    blob = json.dumps(
        {"stage": stage, "params": params, "inputs": dict(inputs), "code": code_version()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class StageOutput:
    """What a stage's ``compute`` returns for ``StageStore.find_or_write`` to write: Parquet ``tables``, other
    ``files`` (bytes) and the manifest's ``extra``. ``value``: anything computed that is not written, kept for the
    task (what a figure is drawn from). ``before``: companion stages written first, keyed by the same parameters
    and inputs (ingest's fitted preprocessor)."""

    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, bytes] = field(default_factory=dict)
    value: Any = None
    before: Mapping[str, StageOutput] = field(default_factory=dict)
    #: files handed to a person to edit in place (the labels stage's to_label.csv): written with the stage, listed
    #: in its manifest by name only, never checked against a hash, so filling one keeps the stage valid
    handout: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class StageRun:
    """A stage that ``find_or_write`` found or wrote: its manifest, and ``output`` when this call computed it
    (None when an identical earlier stage was adopted)."""

    store: StageStore
    stage: str
    manifest: dict[str, Any]
    output: StageOutput | None

    @property
    def reused(self) -> bool:
        """Whether an identical earlier stage was adopted (``compute`` was not called)."""
        return self.output is None

    @property
    def value(self) -> Any:
        """The computed ``StageOutput.value``; None when the stage was reused."""
        return None if self.output is None else self.output.value

    def has(self, name: str) -> bool:
        """Whether the stage holds the table ``name`` (an optional one, e.g. selection's ``rt_matrix``)."""
        return f"{name}.parquet" in self.manifest["files"]

    def table(self, name: str) -> pd.DataFrame:
        """Table ``name``: as computed when this call computed it, else read back (hash-checked)."""
        if self.output is not None:
            return self.output.tables[name]
        return self.store.read_table(self.stage, name)


@dataclass(frozen=True)
class StageStore:
    """Files of one flow run under ``run_root/run_id``."""

    run_root: Path
    run_id: str

    @property
    def run_dir(self) -> Path:
        return Path(self.run_root) / self.run_id

    def stage_dir(self, stage: str) -> Path:
        return self.run_dir / stage

    def manifest(self, stage: str) -> dict[str, Any]:
        path = self.stage_dir(stage) / MANIFEST
        if not path.exists():
            raise FileNotFoundError(f"stage {stage!r} has no manifest at {path}; run that stage first")
        return json.loads(path.read_text())

    def has_stage(self, stage: str) -> bool:
        """Whether this run has written (or adopted) ``stage``."""
        return (self.stage_dir(stage) / MANIFEST).exists()

    def reused_from(self, stage: str) -> str | None:
        """The run ``stage`` was copied from (None when this run computed it or has no such stage)."""
        return self.manifest(stage).get("reused_from") if self.has_stage(stage) else None

    def inputs(self, reads: Iterable[Read], also: Mapping[str, str] | None = None) -> dict[str, str]:
        """A stage's input hashes, derived from the files it declares it reads: each keyed ``Read``'s SHA-256 under
        its key (an optional one this run lacks is left out), plus ``also``, inputs that are no stage file (a
        registered model's version, the tracking store)."""
        out: dict[str, str] = {}
        for r in reads:
            if r.key is None:
                continue
            entry = self.manifest(r.stage)["files"].get(r.file) if self.has_stage(r.stage) else None
            if entry is None:
                if r.optional:
                    continue
                raise FileNotFoundError(f"stage {r.stage!r} has no {r.file} in this run ({self.run_dir}); run "
                                        "that stage first")
            if r.key in out:
                raise ValueError(f"two declared reads share the input name {r.key!r}")
            out[r.key] = entry["sha256"]
        if set(out) & set(also or {}):
            raise ValueError(f"inputs {sorted(set(out) & set(also or {}))} are both a stage file and given")
        return out | dict(also or {})

    def key(self, stage: str, params: Mapping[str, Any], reads: Iterable[Read],
            also: Mapping[str, str] | None = None) -> str:
        """The key ``find_or_write`` gives ``stage`` (``stage_key`` of its parameters and derived inputs)."""
        return stage_key(stage, params, self.inputs(reads, also))

    def find_or_write(self, stage: str, params: Mapping[str, Any], reads: Iterable[Read],
                      compute: Callable[[], StageOutput], *, also: Mapping[str, str] | None = None,
                      companions: tuple[str, ...] = (), reuse: bool = True) -> StageRun:
        """The stage contract in one place: derive the inputs from the declared ``reads`` (plus ``also``) and the
        key; adopt a verified earlier stage of that key (this run's, then any under the root; with every one of its
        ``companions``, stages ``compute`` writes first under the same parameters and inputs), or call ``compute``
        and write what it returns, files first and the manifest last. While ``compute`` runs, a read of a stage
        file not in ``reads`` raises ``UndeclaredReadError``; an exception in ``compute`` writes nothing.
        ``reuse=False``: always compute (a stage whose manifest names this run's MLflow runs)."""
        reads = tuple(reads)
        inputs = self.inputs(reads, also)
        key = stage_key(stage, params, inputs)
        found = self._reusable(stage, key, params, inputs, companions) if reuse else None
        if found is not None:
            from tasks.logs import run_logger

            run_logger().info("%s: reusing stage from run %s (same inputs and parameters)", stage,
                              found[stage]["run_id"])
            for c in (*companions, stage):  # the companions first, as when written
                manifest = self.adopt(c, found[c])
            return StageRun(self, stage, manifest, None)
        token = _COMPUTING.set((stage, frozenset((r.stage, r.file) for r in reads)))
        try:
            out = compute()
        finally:
            _COMPUTING.reset(token)
        if set(out.before) != set(companions):
            raise ValueError(f"stage {stage!r} computed companions {sorted(out.before)}, declared {list(companions)}")
        for c in companions:  # first: the stage's manifest on disk means its companions are there too
            o = out.before[c]
            self.write_stage(c, o.tables, key=stage_key(c, params, inputs), params=params, inputs=inputs,
                             extra=o.extra, files=o.files, handout=o.handout)
        manifest = self.write_stage(stage, out.tables, key=key, params=params, inputs=inputs, extra=out.extra,
                                    files=out.files, handout=out.handout)
        return StageRun(self, stage, manifest, out)

    def _reusable(self, stage: str, key: str, params: Mapping[str, Any], inputs: Mapping[str, str],
                  companions: tuple[str, ...]) -> dict[str, dict[str, Any]] | None:
        """Stage → its verified manifest to adopt, for ``stage`` (``key``) and each companion, when every one of them
        can be reused; else None."""
        found = self.find_reusable(stage, key)
        if found is None:
            return None
        near = {c: self.find_reusable(c, stage_key(c, params, inputs)) for c in companions}
        if any(m is None for m in near.values()):
            return None
        return {c: m for c, m in near.items() if m is not None} | {stage: found}

    def write_stage(
        self,
        stage: str,
        tables: Mapping[str, pd.DataFrame],
        *,
        key: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, str],
        extra: Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        handout: Mapping[str, bytes] | None = None,
    ) -> dict[str, Any]:
        """Write ``tables`` (name → DataFrame), other ``files`` and ``handout`` files (``StageOutput.handout``: not
        hashed), then the manifest last.

        Every file is first written in full to a temp file beside its place, and only once all of them (the
        manifest too) are written are they renamed into place, the manifest last: a write that fails (a full
        disk: ``StageWriteError``) leaves the stage's previous files and manifest as they were, and no temp file."""
        d = self.stage_dir(stage)
        entries: dict[str, Any] = {}
        staged: list[tuple[Path, Path]] = []  # (temp file, its place)
        try:
            for name, df in tables.items():
                path = d / f"{name}.parquet"
                table = pa.Table.from_pandas(df, preserve_index=False)
                tmp = _write_temp(path, lambda f, t=table: pq.write_table(t, f))
                staged.append((tmp, path))
                entries[path.name] = {
                    "rows": int(len(df)),
                    "schema": {str(c): str(t) for c, t in df.dtypes.items()},
                    "sha256": sha256_file(tmp),
                }
            for name, data in (files or {}).items():
                path = d / name
                tmp = _write_temp(path, lambda f, b=data: f.write(b))
                staged.append((tmp, path))
                entries[name] = {"sha256": sha256_file(tmp), "bytes": len(data)}
            for name, data in (handout or {}).items():
                path = d / name
                staged.append((_write_temp(path, lambda f, b=data: f.write(b)), path))
            manifest = {
                "stage": stage,
                "key": key,
                "run_id": self.run_id,
                "params": dict(params),
                "inputs": dict(inputs),
                "code_version": code_version(),
                "files": entries,
                "extra": dict(extra or {}),
            }
            if handout:
                manifest["handout"] = sorted(handout)
            data = _json_bytes(manifest)
            staged.append((_write_temp(d / MANIFEST, lambda f: f.write(data)), d / MANIFEST))
            for tmp, path in staged:  # the manifest last
                os.replace(tmp, path)
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        return manifest

    def verify(self, stage_dir: Path) -> dict[str, Any] | None:
        """The manifest of ``stage_dir`` if every file it lists is present with its recorded hash."""
        mpath = stage_dir / MANIFEST
        try:
            manifest = json.loads(mpath.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        for name, entry in manifest.get("files", {}).items():
            p = stage_dir / name
            if not p.exists() or sha256_file(p) != entry["sha256"]:
                return None
        return manifest

    def find_reusable(self, stage: str, key: str) -> dict[str, Any] | None:
        """A verified manifest with ``key`` for ``stage`` — this run's first, then any run under the root."""
        here = self.stage_dir(stage)
        candidates = [here] + sorted(
            p for p in Path(self.run_root).glob(f"*/{stage}") if p != here and p.is_dir()
        )
        for d in candidates:
            mpath = d / MANIFEST
            if not mpath.exists():
                continue
            try:
                if json.loads(mpath.read_text()).get("key") != key:
                    continue
            except (OSError, json.JSONDecodeError):
                continue
            manifest = self.verify(d)
            if manifest is not None:
                return manifest | {"_dir": str(d)}
        return None

    def adopt(self, stage: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Copy a verified stage from another run folder into this run (files first, manifest last)."""
        src = Path(manifest["_dir"])
        dst = self.stage_dir(stage)
        if src.resolve() == dst.resolve():
            return {k: v for k, v in manifest.items() if k != "_dir"}
        dst.mkdir(parents=True, exist_ok=True)
        for name in manifest["files"]:
            _atomic_write_bytes(dst / name, lambda f, n=name: f.write((src / n).read_bytes()))
        for name in manifest.get("handout", []):  # as the person left it (filled or not), when still there
            if (src / name).is_file():
                _atomic_write_bytes(dst / name, lambda f, n=name: f.write((src / n).read_bytes()))
        out = {k: v for k, v in manifest.items() if k != "_dir"}
        out["reused_from"] = manifest.get("run_id")
        out["run_id"] = self.run_id
        write_json_atomic(out, dst / MANIFEST)
        return out

    def path(self, stage: str, name: str) -> Path:
        return self.stage_dir(stage) / name

    def _checked(self, stage: str, fname: str) -> Path:
        """The path of ``<stage>/<fname>`` after checking its bytes against the manifest (and that a computing
        stage declares the read)."""
        _note_read(stage, fname)
        entry = self.manifest(stage)["files"].get(fname)
        path = self.stage_dir(stage) / fname
        if entry is None:
            raise FileNotFoundError(f"stage {stage!r} manifest lists no {fname}")
        if not path.exists() or sha256_file(path) != entry["sha256"]:
            raise CorruptStageError(
                f"{path} does not match the SHA-256 in its manifest (truncated or altered); "
                "delete the stage folder and re-run to recompute it"
            )
        return path

    def read_table(self, stage: str, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Read ``<stage>/<name>.parquet`` (only ``columns`` when given) after checking its bytes against the
        manifest."""
        return pq.read_table(self._checked(stage, f"{name}.parquet"), columns=columns).to_pandas()

    def read_bytes(self, stage: str, name: str) -> bytes:
        """The bytes of ``<stage>/<name>`` (a file that is no table) after checking them against the manifest."""
        return self._checked(stage, name).read_bytes()

    def file_hash(self, stage: str, name: str) -> str:
        return self.manifest(stage)["files"][name]["sha256"]
