"""flows.config: the typed parameters of the retrain and score flows. Unknown keys are refused naming the nearest
valid key (also in the Prefect UI's form), list fields read from one comma-separated string in any case, the
deciding selector must be run, ``simulate_bias="auto"`` resolves to RT §3.1 on the embedded example only, and
the choices are the registries'."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from flows.config import (
    EXAMPLE_SOURCE,
    EXAMPLE_TARGET,
    BiasSpec,
    RetrainConfig,
    ScoreConfig,
    unknown_keys_message,
)
from flows.paths import PROJECT_DIR


def test_choices_are_the_registries() -> None:
    from shiftlib.learners import LEARNERS
    from shiftlib.selection import SELECTORS
    from shiftlib.weights import TARGET_WEIGHTERS

    f = RetrainConfig.model_fields
    assert list(get_args(get_args(f["learners"].annotation)[0])) == list(LEARNERS)
    assert set(get_args(get_args(f["selectors"].annotation)[0])) == set(SELECTORS)
    assert set(get_args(f["selector"].annotation)) == set(SELECTORS)
    # the weighting methods a run can train with: every weighter that needs only the rows (not the evaluation-only
    # oracle), plus none/auto; the config spells them (it must not import scikit-learn), this test keeps them in step
    assert get_args(f["weighting"].annotation) == ("none", *TARGET_WEIGHTERS, "auto")
    assert "oracle" not in TARGET_WEIGHTERS


def test_a_seed_numpy_cannot_take_is_refused_at_the_door() -> None:
    # numpy's generators take 0 … 2**32 - 1; -1 and 10**29 passed the door and failed mid-run as internal errors
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="seed\n  Input should be greater than or equal to 0"):
        RetrainConfig(seed=-1)
    with pytest.raises(ValidationError, match="seed\n  Input should be less than or equal to 4294967295"):
        RetrainConfig(seed=10**29)
    assert RetrainConfig(seed=2**32 - 1).seed == 4294967295


def test_prefect_form_takes_the_deployment_parameters_and_refuses_unknown_keys():
    """The UI's custom-run form validates against the flow's parameter schema (``additionalProperties:
    false`` from ``extra="forbid"``): prefect.yaml's parameters pass, a misspelt key does not."""
    import jsonschema
    import yaml
    from prefect.utilities.callables import parameter_schema

    from flows.retrain import retrain

    schema = parameter_schema(retrain).model_dump_for_openapi()
    params = yaml.safe_load((Path(PROJECT_DIR) / "prefect.yaml").read_text())["deployments"][0]["parameters"]
    jsonschema.validate(params, schema)
    assert params["config"]["simulate_bias"] == "auto"
    with pytest.raises(jsonschema.ValidationError, match="'learnerz' was unexpected"):
        jsonschema.validate({"config": params["config"] | {"learnerz": ["LR"]}}, schema)


def test_unknown_keys_are_named_with_the_nearest_valid_key() -> None:
    # worked by hand from the docstring's example: difflib finds 'learners' for 'learnerz', nothing for 'qqq'
    assert unknown_keys_message(["learnerz"], ["seed", "learners"], "the config") == (
        "unknown key 'learnerz' (did you mean 'learners'?) in the config; the keys are ['learners', 'seed']")
    assert unknown_keys_message(["learnerz", "qqq"], ["seed", "learners"], "the config") == (
        "unknown keys 'learnerz' (did you mean 'learners'?), 'qqq' in the config; the keys are ['learners', 'seed']")


@pytest.mark.parametrize(("make", "where"), [
    (lambda: RetrainConfig(learnerz=["LR"]), "unknown key 'learnerz' (did you mean 'learners'?) in the config;"),
    (lambda: ScoreConfig(model="m", batch="b", out="o", modle="m"),
     "unknown key 'modle' (did you mean 'model'?) in the score config;"),
    (lambda: BiasSpec(mechanism="rt_sort", parms={}),
     "unknown key 'parms' (did you mean 'params'?) in BiasSpec (simulate_bias);"),
])
def test_each_model_refuses_unknown_keys_saying_where(make, where: str) -> None:
    with pytest.raises(ValidationError) as err:
        make()
    assert where in str(err.value)


def test_simulated_bias_auto_is_rt_sort_on_the_example_only(tmp_path: Path) -> None:
    assert (RetrainConfig().source, RetrainConfig().target) == (EXAMPLE_SOURCE, EXAMPLE_TARGET)
    assert RetrainConfig().applied_bias() == BiasSpec(mechanism="rt_sort", params={})  # RT §3.1 sort-and-drop
    own = {"source": f"file:{tmp_path / 's.csv'}", "target": f"file:{tmp_path / 't.csv'}"}
    assert RetrainConfig(**own).applied_bias() is None  # a user's own tables are used as given
    assert RetrainConfig(target=own["target"]).applied_bias() is None  # the example source on another target
    assert RetrainConfig(simulate_bias=None).applied_bias() is None  # null: none, even on the example
    asked = BiasSpec(mechanism="kmm_threshold", params={"feature": 0})
    assert RetrainConfig(**own, simulate_bias=asked).applied_bias() == asked


def test_list_fields_read_a_comma_separated_string_in_any_case() -> None:
    cfg = RetrainConfig(learners="lr, Rf,cslr-RBF", selectors="RT,Scv", selector=" Rt ", drop_columns="Age, BMI,")
    assert cfg.learners == ["LR", "RF", "CSLR-rbf"]  # spelt as the learner registry spells them
    assert (cfg.selectors, cfg.selector) == (["rt", "scv"], "rt")
    assert cfg.drop_columns == ["Age", "BMI"]  # column names keep their case
    with pytest.raises(ValidationError, match=r"learners\.1\n  Input should be 'DT'"):  # the second name, XGB
        RetrainConfig(learners="LR,XGB")


@pytest.mark.parametrize(("learners", "words"), [
    ([], "give at least one learner"),
    (["LR", "lr"], "learners repeat a name: ['LR', 'LR']"),  # the same learner in two spellings
])
def test_learners_are_not_empty_and_do_not_repeat(learners: list[str], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        RetrainConfig(learners=learners)
    assert words in str(err.value)


def test_the_deciding_selector_must_be_run() -> None:
    with pytest.raises(ValidationError, match=r"selector 'rt' must be one of selectors \['scv'\]"):
        RetrainConfig(selectors=["scv"], selector="rt")
    assert RetrainConfig(selectors=["scv", "rt"], selector="rt").selector == "rt"


def test_promote_confidence_keeps_promote_and_keep_apart() -> None:
    # promote when P >= c, keep when P <= 1 - c: the two regions are disjoint only for c > 0.5 (and c < 1)
    for bad in (0.5, 1.0):
        with pytest.raises(ValidationError, match="promote_confidence"):
            RetrainConfig(promote_confidence=bad)
    assert RetrainConfig(promote_confidence=0.51).promote_confidence == 0.51


def test_the_score_config_needs_a_model_a_batch_and_an_out() -> None:
    with pytest.raises(ValidationError) as err:
        ScoreConfig()
    assert {e["loc"][0] for e in err.value.errors() if e["type"] == "missing"} == {"model", "batch", "out"}
    cfg = ScoreConfig(model="m@champion", batch="file:b.csv", out="file:s.parquet")
    assert (cfg.overwrite, cfg.id_column, cfg.min_accuracy, cfg.seed, cfg.experiment) == (
        False, None, None, 0, "shiftflow-score")
    with pytest.raises(ValidationError, match="min_accuracy"):
        ScoreConfig(model="m", batch="b", out="o", min_accuracy=1.5)  # an accuracy lies in [0, 1]


def test_the_unvouched_champion_policy_defaults_to_shiftlibs_and_refuses_other_words():
    from shiftlib.decisions import UNVOUCHED, UNVOUCHED_CHAMPION

    assert RetrainConfig().unvouched_champion == UNVOUCHED_CHAMPION == "ask"
    assert {RetrainConfig(unvouched_champion=w).unvouched_champion for w in UNVOUCHED} == {"ask", "promote"}
    with pytest.raises(ValueError, match="'ask' or 'promote'"):
        RetrainConfig(unvouched_champion="yes")
