"""shiftflow stages: each task reads its inputs, calls shiftlib, writes Parquet, logs to MLflow."""


import os

for _k, _v in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    # tasks run concurrently (threads or Dask workers); one BLAS thread each avoids oversubscribing
    # small machines (measured by the drift work here: ~30x slower small fits under contention)
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}.items():
    os.environ.setdefault(_k, _v)
