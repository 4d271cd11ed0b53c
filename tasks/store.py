"""Stage persistence: ``<run root>/<flow-run-id>/<stage>/*.parquet`` plus ``manifest.json``.

Every file is written atomically (a temp file in the same folder, fsync, then ``os.replace``), so a
killed run leaves either the old file or the new one, never a torn one. The manifest carries, per
file, the row count, the column schema and the SHA-256 of the bytes, plus the stage's *key*: a hash of
the stage name, its parameters, the hashes of its inputs and the code version. A later run with the
same key finds the manifest (in any run folder under the same root), verifies every file's hash and
copies the stage instead of recomputing it. A file whose bytes no longer match its manifest is never
read: ``read_table`` raises ``CorruptStageError`` and ``find_reusable`` skips that stage.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
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
    ) -> dict[str, Any]:
        """Write ``tables`` (name → DataFrame) and other ``files``, then the manifest last.

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
        out = {k: v for k, v in manifest.items() if k != "_dir"}
        out["reused_from"] = manifest.get("run_id")
        out["run_id"] = self.run_id
        write_json_atomic(out, dst / MANIFEST)
        return out

    def path(self, stage: str, name: str) -> Path:
        return self.stage_dir(stage) / name

    def read_table(self, stage: str, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Read ``<stage>/<name>.parquet`` (only ``columns`` when given) after checking its bytes against the
        manifest."""
        fname = f"{name}.parquet"
        manifest = self.manifest(stage)
        entry = manifest["files"].get(fname)
        path = self.stage_dir(stage) / fname
        if entry is None:
            raise FileNotFoundError(f"stage {stage!r} manifest lists no {fname}")
        if not path.exists() or sha256_file(path) != entry["sha256"]:
            raise CorruptStageError(
                f"{path} does not match the SHA-256 in its manifest (truncated or altered); "
                "delete the stage folder and re-run to recompute it"
            )
        return pq.read_table(path, columns=columns).to_pandas()

    def file_hash(self, stage: str, name: str) -> str:
        return self.manifest(stage)["files"][name]["sha256"]
