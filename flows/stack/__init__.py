"""The local service stack behind ``shiftflow up`` / ``shiftflow down`` (Prefect server, MLflow server, worker).

=============  ================================================================
module         holds
=============  ================================================================
``procs``      the ``/proc`` process tree: liveness, descendants, stop escalation
``record``     the JSON record ``$SHIFTFLOW_HOME/services.json``
``http``       health probes and port checks on 127.0.0.1
``stack``      ``up`` / ``down``, the commands and environments of the services
=============  ================================================================

Imports neither prefect nor mlflow (both take seconds to import on a loaded machine): it talks to the
servers over HTTP and runs their CLIs as child processes.
"""

from flows.stack.http import HOST, free_port, healthy, port_free
from flows.stack.procs import ServiceError, is_alive, process_start_time, process_tree, stop_process
from flows.stack.record import RECORD_NAME, read_record, write_record
from flows.stack.stack import (
    MLFLOW_SERVER,
    POOL,
    PREFECT_SERVER,
    PREFECT_WORKER,
    SERVICE_ORDER,
    Stack,
    down,
    up,
)

__all__ = [
    "HOST",
    "MLFLOW_SERVER",
    "POOL",
    "PREFECT_SERVER",
    "PREFECT_WORKER",
    "RECORD_NAME",
    "SERVICE_ORDER",
    "ServiceError",
    "Stack",
    "down",
    "free_port",
    "healthy",
    "is_alive",
    "port_free",
    "process_start_time",
    "process_tree",
    "read_record",
    "stop_process",
    "up",
    "write_record",
]
