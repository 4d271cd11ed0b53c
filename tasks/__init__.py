"""shiftflow stages: each task reads its inputs, calls shiftlib, writes Parquet, logs to MLflow."""


import os

for _k, _v in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
}.items():  # BLAS/OpenMP threads are the flow's business (threadpool_limits, shiftlib.budget.concurrency)
    os.environ.setdefault(_k, _v)
