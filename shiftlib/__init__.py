"""shiftlib — the science of shiftflow: selection bias, drift, importance weights, learners,
model selection without target labels, and calibration after undersampling.

Pure numpy / pandas / scikit-learn / cvxpy: no Prefect, no MLflow, no file paths.
"""

__version__ = "0.1.0"
