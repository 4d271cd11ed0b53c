"""shiftflow stages: each task reads its inputs, calls shiftlib, writes Parquet, logs to MLflow.

Two kinds of module live here (the import contract "the plumbing imports no stage" in pyproject.toml holds it):

* **stages** of the retrain flow, in the order it runs them: ``ingest``, ``drift``, ``weights``, ``training``,
  ``estimation``, ``evaluation``, ``served``, ``labels``, ``selection``, ``recalibration``, ``champion``; and
  the other flows' tasks: ``report`` (the closing report), ``scoring`` (``shiftflow score``), ``history``;
* **plumbing** they share: ``store`` (stage folders, manifests, atomic writes), ``inputs`` and ``sources``
  (reading and checking tables), ``tracking`` (MLflow, ``RunContext``), ``locks``, ``limits`` (threads),
  ``logs``, ``events`` (Prefect events), ``served_flavor`` (the MLflow flavor of a served model).
"""


import os

for _k, _v in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
}.items():  # BLAS/OpenMP threads are the flow's business (threadpool_limits, shiftlib.budget.concurrency)
    os.environ.setdefault(_k, _v)
