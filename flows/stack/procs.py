"""The ``/proc`` process tree of the local stack: is a recorded pid still ours, what did it start, stop it.

Linux ``/proc`` first (start times tell a recorded pid from a recycled one); signal 0 where there is none.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_STOP_TIMEOUT_S", "ServiceError", "is_alive", "process_start_time", "process_tree",
           "raise_if_stopped", "stop_as_interrupt", "stop_others", "stop_process"]

DEFAULT_STOP_TIMEOUT_S = 20.0


class ServiceError(RuntimeError):
    """A service could not be started or stopped; the message names the problem and the fix."""


#: the stop signals received inside ``stop_as_interrupt`` (the last one says which to send again)
_received: list[int] = []

#: seconds before a swallowed stop request is sent again (out of the finaliser that swallowed it)
REDELIVER_AFTER_S = 0.2


def _interrupt(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def _stop_signal_of(exc: BaseException | None) -> int | None:
    """The signal a stop exception stands for: Prefect's ``TerminationSignal`` (its SIGTERM bridge during a flow
    run) carries it; a ``KeyboardInterrupt`` is the last stop signal received, else Ctrl-C (SIGINT)."""
    if isinstance(exc, KeyboardInterrupt):
        return _received[-1] if _received else signal.SIGINT
    if type(exc).__name__ == "TerminationSignal" and isinstance(getattr(exc, "signal", None), int):
        return int(exc.signal)  # type: ignore[union-attr]
    return None


def _redeliver_hook(previous: Any) -> Any:
    """A ``sys.unraisablehook`` that sends a swallowed stop request again.

    A signal handler's exception is raised in whatever the main thread is running; when that is a finaliser
    (a weakref callback, ``__del__``: garbage collection can run one at any bytecode), CPython cannot propagate
    it and hands it to ``sys.unraisablehook`` ("Exception ignored in ..."), and the run would go on as if no stop
    had been asked. This hook sends the same signal to this process again shortly after, from a timer thread, so
    its handler raises at a point that propagates; other unraisable exceptions go to the previous hook."""

    def hook(unraisable: Any) -> None:
        signum = _stop_signal_of(unraisable.exc_value)
        if signum is None:
            previous(unraisable)
            return
        print(f"shiftflow: the stop request ({signal.Signals(signum).name}) was raised inside a finaliser, which "
              "cannot pass it on; sending it again", file=sys.stderr, flush=True)
        timer = threading.Timer(REDELIVER_AFTER_S, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()

    return hook


#: the stop requests a run turns into KeyboardInterrupt: SIGTERM (kill, a scheduler's timeout, systemd's stop)
#: and SIGHUP (the terminal or ssh session closed)
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextmanager
def stop_as_interrupt() -> Iterator[None]:
    """Within the block, a stop request (``STOP_SIGNALS``) raises ``KeyboardInterrupt`` in the main thread as
    Ctrl-C does, so ``finally`` blocks and exit hooks run (the servers this process started are stopped)
    instead of the process dying on the spot. Every stop request, Ctrl-C's SIGINT too, is remembered: one that a
    finaliser swallowed is sent again (:func:`_redeliver_hook`), and one that code catching every exception
    swallowed is raised again where the run next starts a stage (:func:`raise_if_stopped`). The previous handlers
    and ``sys.unraisablehook`` come back after the block. Outside the main thread it does nothing."""
    try:
        previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, *STOP_SIGNALS)}
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _redeliver_hook(previous_hook)
    _received.clear()
    try:
        yield
    finally:
        _received.clear()
        sys.unraisablehook = previous_hook
        for s, handler in previous.items():
            signal.signal(s, handler)


def raise_if_stopped() -> None:
    """Raise ``KeyboardInterrupt`` when a stop request reached this process inside :func:`stop_as_interrupt` and
    the run still goes on: the handler's exception was swallowed by code that catches every exception (Prefect's
    ``Call.run`` stores a ``BaseException`` in a future that nothing may read). The run calls it where it starts a
    stage, so a swallowed Ctrl-C still ends the run there. Outside the block nothing is remembered: a no-op."""
    if _received:
        raise KeyboardInterrupt


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (index 0 = state), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (tells a recorded pid from a recycled one)."""
    st = _proc_stat(pid)
    return int(st[19]) if st else None


def is_alive(pid: int, start_time: int | None = None) -> bool:
    """True if ``pid`` runs (not a zombie) and, when given, started at ``start_time``."""
    st = _proc_stat(pid)
    if st is None:
        if Path("/proc/self/stat").exists():
            return False
        try:  # no /proc (not Linux): fall back to signal 0
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if st[0] in ("Z", "X"):
        return False
    return start_time is None or int(st[19]) == start_time


def _all_procs() -> list[tuple[int, int, int, int]]:
    """(pid, ppid, pgid, start_time) of every live process (Linux /proc)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _proc_stat(int(entry.name))
        if st is None or st[0] in ("Z", "X"):
            continue
        out.append((int(entry.name), int(st[1]), int(st[2]), int(st[19])))
    return out


def process_tree(pid: int, pgid: int) -> dict[int, int]:
    """{pid: start_time} of the process group ``pgid`` plus every descendant of ``pid`` (Prefect's process
    worker starts each flow run in a new session, so those are outside the worker's group)."""
    if not Path("/proc/self/stat").exists():
        return {pid: 0} if is_alive(pid) else {}
    procs = _all_procs()
    children: dict[int, list[int]] = {}
    for p, pp, _, _ in procs:
        children.setdefault(pp, []).append(p)
    starts = {p: s for p, _, _, s in procs}
    tree = {p: s for p, _, g, s in procs if g == pgid}
    stack = [pid, *tree]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in tree:
                tree[c] = starts[c]
                stack.append(c)
    return tree


def _signal_tree(pgid: int, tree: Mapping[int, int], sig: int) -> None:
    """One ``sig`` to the group and one to each descendant outside it (never two to the same process)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    _signal_each({p: s for p, s in tree.items() if (st := _proc_stat(p)) is not None and int(st[2]) != pgid}, sig)


def _signal_each(tree: Mapping[int, int], sig: int) -> None:
    """One ``sig`` to each process of ``tree`` ({pid: start time}) still running with its recorded start time."""
    for pid, start in tree.items():
        if is_alive(pid, start):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_gone(tree: Mapping[int, int], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if not any(is_alive(p, s) for p, s in tree.items()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def stop_process(entry: Mapping[str, Any], timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> str:
    """Stop one recorded service: SIGTERM its group, wait; SIGTERM again, wait; then SIGKILL.

    Parameters
    ----------
    entry : mapping
        The service's record entry (``pid``, ``pgid``, ``start_time``).
    timeout_s : float, default 20
        Shared by the two SIGTERM waits.

    Returns
    -------
    str
        What happened, for the user.

    Notes
    -----
    Acts only when the recorded leader still runs with its recorded start time (or, the leader gone, on
    processes still in its group): a recycled pid is left alone.
    """
    pid, pgid, start = int(entry["pid"]), int(entry["pgid"]), entry.get("start_time")
    leader_alive = is_alive(pid, start)
    if not leader_alive and is_alive(pid):
        return f"pid {pid} now belongs to another program (recycled pid); left alone"
    if not leader_alive and pgid != pid and is_alive(pgid):
        return f"process group {pgid} now belongs to another program; left alone"
    tree = process_tree(pid, pgid) if leader_alive else {p: s for p, _, g, s in _safe_procs() if g == pgid}
    if not tree:
        return "already stopped"
    steps = [(signal.SIGTERM, timeout_s / 2), (signal.SIGTERM, timeout_s / 2), (signal.SIGKILL, 5.0)]
    for n, (sig, wait_s) in enumerate(steps, 1):
        _signal_tree(pgid, tree, sig)
        if _wait_gone(tree, wait_s):
            how = "SIGTERM" if n == 1 else "two SIGTERMs" if n == 2 else "SIGKILL"
            return f"stopped ({len(tree)} process{'es' if len(tree) > 1 else ''}, {how})"
    left = sorted(p for p, s in tree.items() if is_alive(p, s))
    raise ServiceError(f"processes {left} survived SIGKILL; check `ps -o pid,stat,cmd -p {','.join(map(str, left))}`")


def stop_others(timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> dict[int, int]:
    """SIGTERM every other process of this process's group and every descendant of it; SIGKILL those left
    after ``timeout_s``. Returns {pid: start time} of the processes signalled.

    For a process that must stop what it started and then exit itself (``flows.stack.guard``): a group
    signal would reach the caller too, before it could escalate."""
    me = os.getpid()
    tree = {p: s for p, s in process_tree(me, os.getpgrp()).items() if p != me}
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        _signal_each(tree, sig)
        if _wait_gone(tree, wait_s):
            break
    return tree


def _safe_procs() -> list[tuple[int, int, int, int]]:
    return _all_procs() if Path("/proc/self/stat").exists() else []
