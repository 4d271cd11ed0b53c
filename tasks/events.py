"""Prefect events for the decisions a run takes (``prefect.events.emit_event``): what an automation in the
Prefect UI (or ``prefect.yaml``'s deployment triggers) reacts to.

=================================  ================================================================
event                              when
=================================  ================================================================
``shiftflow.champion.promoted``    the new version took the ``champion`` alias
``shiftflow.champion.kept``        the champion stays: the new version is not more accurate
``shiftflow.champion.undecided``   the evidence is not enough either way: the champion stays
``shiftflow.champion.refused``     the new version may not serve (one class, no better than the majority rule)
``shiftflow.alert.accuracy``       the served model's estimated accuracy is surely below ``min_accuracy``
                                   (a retrain's served candidate, or a version on a batch it scored)
``shiftflow.drift``                a scored batch drifted from the version's training source
=================================  ================================================================

Every event's resource is the registered model (``prefect.resource.id`` = ``shiftflow.model.<name>``, label
``shiftflow.deployment`` = the deciding run's deployment) and
its payload carries the model name, the versions and the probability the decision rests on. Events are sent
from inside a flow run only (a task called as a plain function would otherwise start a temporary Prefect
server to send one), and emitting never fails a run: an event Prefect cannot take is dropped with a log line."""

from __future__ import annotations

from typing import Any

from tasks.logs import run_logger

EVENTS = ("shiftflow.champion.promoted", "shiftflow.champion.kept", "shiftflow.champion.undecided",
          "shiftflow.champion.refused", "shiftflow.alert.accuracy", "shiftflow.drift")


def model_resource(model_name: str, deployment: str | None = None) -> dict[str, str]:
    """The Prefect resource an event about ``model_name`` concerns; ``shiftflow.deployment`` names the
    deployment whose run decided (empty outside one), so a trigger can react to one deployment's events only."""
    return {"prefect.resource.id": f"shiftflow.model.{model_name}", "prefect.resource.name": model_name,
            "shiftflow.deployment": deployment or ""}


def emit(event: str, model_name: str, payload: dict[str, Any]) -> bool:
    """Emit ``event`` (one of :data:`EVENTS`) about ``model_name``; True when Prefect took it."""
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}; one of {list(EVENTS)}")
    from prefect import runtime
    from prefect.events import emit_event

    if runtime.flow_run.id is None:
        return False
    clean = {k: (None if isinstance(v, float) and v != v else v) for k, v in payload.items()}  # NaN is not JSON
    try:
        sent = emit_event(event, resource=model_resource(model_name, runtime.deployment.name),
                          payload={"model_name": model_name} | clean)
    except Exception as err:  # an event must never fail the decision it reports
        run_logger().warning("event %s not sent: %s", event, err)
        return False
    return sent is not None
