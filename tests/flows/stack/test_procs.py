"""flows.stack.procs: the ``/proc`` process tree. Liveness that tells a recorded pid from a recycled one and a
zombie from a running process, the tree of a service (its group plus descendants in other sessions), stopping
one recorded service, and stop requests (SIGTERM, SIGHUP) turned into ``KeyboardInterrupt`` inside a block."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flows.stack.procs import is_alive, process_start_time, process_tree, stop_as_interrupt, stop_process
from tests.flows.stack.conftest import children_of
from tests.flows.stack.conftest import record_entry as _entry


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_stop_request_is_an_interrupt_inside_the_block_only(signame: str) -> None:
    """``stop_as_interrupt``: kill (SIGTERM) or a closed terminal (SIGHUP) raises KeyboardInterrupt in the block,
    so exit hooks run (the temporary API is stopped); the previous handler is back after it."""
    from flows.stack.procs import stop_as_interrupt

    sig = getattr(signal, signame)
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt), stop_as_interrupt():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler runs at the next bytecode: never reached
    assert signal.getsignal(sig) is before


_SWALLOWED = """
import os, signal, sys, time, weakref
from contextlib import nullcontext
from flows.stack.procs import stop_as_interrupt

class A:
    pass

def finaliser(_):  # the stop request arrives while garbage collection runs this callback
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10**6):  # the handler raises here, at the next bytecode, inside the finaliser
        pass
    print("finaliser finished", flush=True)

if sys.argv[1] == "prefect":  # Prefect's SIGTERM bridge, installed as in a flow run
    from prefect.utilities.engine import capture_sigterm
    bridge = capture_sigterm
else:
    bridge = nullcontext
try:
    with stop_as_interrupt(), bridge():
        a = A()
        ref = weakref.ref(a, finaliser)
        del a
        print("after the finaliser", flush=True)
        time.sleep(20)
        print("not stopped", flush=True)
except BaseException as exc:  # KeyboardInterrupt, or Prefect's TerminationSignal
    print("stopped:", type(exc).__name__, flush=True)
"""


@pytest.mark.parametrize("bridge", ["ours", "prefect"])
def test_a_stop_request_a_finaliser_swallowed_is_sent_again(bridge: str) -> None:
    """A signal handler's exception raised inside a finaliser (a weakref callback run by garbage collection) is
    swallowed by CPython (it would print "Exception ignored in ..."): the stop request was lost and the run went on
    (``test_cli``'s stopped run failed so under load). ``stop_as_interrupt`` sends it again, so the block stops,
    with our handler and with Prefect's SIGTERM bridge (``capture_sigterm``) in front of it."""
    import sys

    out = subprocess.run([sys.executable, "-c", _SWALLOWED, bridge], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[3])
    assert "raised inside a finaliser" in out.stderr, out.stdout + out.stderr  # the first delivery was swallowed
    assert "finaliser finished" not in out.stdout  # it was raised inside the finaliser
    assert "after the finaliser" in out.stdout and "stopped:" in out.stdout, out.stdout + out.stderr
    assert "not stopped" not in out.stdout


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_request_a_catch_all_swallowed_ends_the_run_where_its_next_stage_starts(signame: str) -> None:
    """Ctrl-C (SIGINT) or kill (SIGTERM) whose KeyboardInterrupt lands in code that catches every exception
    (Prefect's ``Call.run`` keeps a ``BaseException`` in a future nothing may read): the run went on to exit 0
    (``test_cli``'s stopped run, under load). The request is remembered, and the next stage does not start."""
    from flows.fanout import stage_clock
    from flows.stack.procs import raise_if_stopped

    before = signal.getsignal(signal.SIGINT)
    started: list[str] = []
    with pytest.raises(KeyboardInterrupt), stop_as_interrupt():
        try:
            os.kill(os.getpid(), getattr(signal, signame))
            time.sleep(5)  # the handler raises here
        except BaseException:  # noqa: BLE001 - the catch-all that swallows it
            pass
        with stage_clock({}, {}, "training"):
            started.append("training")
    assert started == [] and signal.getsignal(signal.SIGINT) is before
    raise_if_stopped()  # after the block nothing is remembered
    with stop_as_interrupt(), stage_clock({}, {}, "training"):  # no stop request: the stage runs
        started.append("training")
    assert started == ["training"]


def test_outside_the_main_thread_a_stop_request_is_left_alone() -> None:
    # signal handlers can only be set in the main thread: there the block runs with the handlers untouched
    before = signal.getsignal(signal.SIGTERM)
    seen: list[Any] = []

    def inside() -> None:
        with stop_as_interrupt():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=inside)
    t.start()
    t.join(timeout=10)
    assert seen == [before] and signal.getsignal(signal.SIGTERM) is before


def test_start_time_is_the_kernels_field_22(spawn: Any) -> None:
    p = spawn(["sleep", "300"])
    # proc(5): field 22 of /proc/<pid>/stat is the start time in clock ticks; "sleep" has no space in its name
    assert process_start_time(p.pid) == int(Path(f"/proc/{p.pid}/stat").read_text().split()[21])
    assert process_start_time(os.getpid()) > 0


def test_a_recycled_pid_and_a_zombie_are_not_alive(spawn: Any) -> None:
    p = spawn(["sleep", "300"])
    start = process_start_time(p.pid)
    assert is_alive(p.pid) and is_alive(p.pid, start)
    assert not is_alive(p.pid, start + 1)  # same pid, other start time: another program
    p.kill()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{p.pid}/stat").read_text().split()[2] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(p.pid)  # exited but not reaped yet: a zombie
    p.wait()
    assert not is_alive(p.pid)  # gone


def _pgid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def test_the_tree_holds_the_group_and_descendants_in_other_sessions(spawn: Any) -> None:
    # like Prefect's process worker, which starts each flow run in a new session (outside the worker's group)
    p = spawn(["sh", "-c", "sleep 300 & setsid sleep 300 & wait"])
    deadline = time.monotonic() + 30
    while len(children_of(p.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    kids = children_of(p.pid)
    assert len(kids) == 2
    # setsid forks when it leads a group already; wait until each child is a sleep (not a shell mid-exec)
    while any(Path(f"/proc/{k}/comm").read_text().strip() != "sleep" for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    outside = [k for k in kids if _pgid(k) != p.pid]
    assert len(outside) == 1  # one child left the group
    tree = process_tree(p.pid, p.pid)
    assert set(tree) == {p.pid, *kids}
    assert tree == {pid: process_start_time(pid) for pid in tree}
    stop_process({"pid": p.pid, "pgid": p.pid, "start_time": tree[p.pid]}, timeout_s=4.0)
    assert not any(is_alive(pid, start) for pid, start in tree.items())  # the one outside the group too


def test_stop_process_says_what_happened(spawn: Any) -> None:
    p = spawn(["sleep", "300"])
    entry = _entry(p)
    assert stop_process(entry, timeout_s=4.0) == "stopped (1 process, SIGTERM)"
    assert p.wait(timeout=10) == -signal.SIGTERM
    assert stop_process(entry, timeout_s=4.0) == "already stopped"


def test_stop_process_leaves_a_recycled_pid_alone(spawn: Any) -> None:
    p = spawn(["sleep", "300"])
    entry = _entry(p) | {"start_time": process_start_time(p.pid) - 1}
    assert stop_process(entry, timeout_s=4.0) == f"pid {p.pid} now belongs to another program (recycled pid); left alone"
    assert p.poll() is None and is_alive(p.pid)


def test_stop_process_escalates_to_sigkill(spawn: Any) -> None:
    p = spawn(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"  # the trap is set
    how = stop_process(_entry(p), timeout_s=0.4)
    assert how.endswith(", SIGKILL)") and p.wait(timeout=10) == -signal.SIGKILL
