"""shiftflow flows: composition of tasks only."""

import tasks  # noqa: F401  (sets Prefect/MLflow environment defaults before either is imported)
