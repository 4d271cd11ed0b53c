"""The run summary (Prefect artifact) when target labels decided: how sure the choice is, and no per-candidate
fewlabel interval (its level does not hold: reports/label_budget_intervals.md)."""

from __future__ import annotations

from tasks.report import summary_markdown

SUMMARY = {
    "drift": {"drifted": True, "domain_auc": 0.7, "mmd_pvalue": 0.01, "drifted_features": ["x0"]},
    "weighting": "kmm", "weights": None, "recalibration": None, "estimate": None, "target_scores": None,
    "champion": {"registered_model": "m", "version": "1", "decision": "champion", "reason": "first"},
    "run_dir": "/nowhere", "mlflow_parent_run_id": "abc", "reused_stages": [], "timings": {},
    "learners": {"LR": {"accuracy": 0.8}, "NB": {"accuracy": 0.7}},
}
SCORES = [
    {"learner": "LR", "selector": "fewlabel", "score": 0.81, "rank": 1, "interval_low": 0.75, "interval_high": 0.87},
    {"learner": "NB", "selector": "fewlabel", "score": 0.74, "rank": 2, "interval_low": 0.68, "interval_high": 0.80},
    {"learner": "LR", "selector": "scv", "score": 0.80, "rank": 1, "interval_low": 0.76, "interval_high": 0.84},
    {"learner": "NB", "selector": "scv", "score": 0.70, "rank": 2, "interval_low": 0.66, "interval_high": 0.74},
]


def test_summary_says_how_sure_the_labels_make_the_choice() -> None:
    sel = {"chosen": "LR", "selector": "fewlabel", "agreement": None,
           "fewlabel": {"p_best": {"LR": 0.9134, "NB": 0.0866}, "n_labels": 100}}
    md = summary_markdown(SUMMARY | {"selection": sel}, SCORES)
    assert "- target labels: P(LR is the best) = 0.91 from 100 labels (fewlabel posterior)" in md
    fewer = summary_markdown(SUMMARY | {"selection": sel | {"fewlabel": sel["fewlabel"] | {"n_labels": 99}}}, SCORES)
    assert ("from 99 labels (fewlabel posterior; below 100 labels it is over-confident, see "
            "reports/label_budget_intervals.md)") in fewer
    row = next(line for line in md.splitlines() if line.startswith("| LR |"))
    assert "0.810, P(best) 0.91 (1)" in row and "[0.750" not in row  # fewlabel: P(best), not its interval
    assert "0.800 [0.760, 0.840] (1)" in row  # other selectors keep their intervals


def test_summary_without_labels_has_no_label_line() -> None:
    md = summary_markdown(SUMMARY | {"selection": {"chosen": "LR", "selector": "scv", "agreement": None}},
                          SCORES[2:])
    assert "target labels" not in md and "P(best)" not in md


def test_summary_notes_a_wide_interval_and_a_one_class_choice() -> None:
    sel = {"chosen": "LR", "selector": "scv", "agreement": None}
    est = {"candidate": "LR", "accuracy": 0.6, "ci_low": 0.2, "ci_high": 0.75, "method": "median", "confidence": 0.95,
           "alert": False, "min_accuracy": None}
    md = summary_markdown(SUMMARY | {"selection": sel, "estimate": est, "classes": ["no", "yes"],
                                     "predicted_classes": {"LR": [1], "NB": [0, 1]}}, SCORES[2:])
    assert "- **note**: a wide interval: the label-free estimators disagree on this shift" in md  # 0.55 wide
    assert "- **note**: LR predicts 'yes' for every target row" in md
    narrow = summary_markdown(SUMMARY | {"selection": sel, "estimate": est | {"ci_low": 0.3},
                                         "classes": ["no", "yes"], "predicted_classes": {"LR": [0, 1]}}, SCORES[2:])
    assert "**note**" not in narrow
    # one budget per report (helper-33 saw two): an undecided gate's note asks for the pair's labels, so the wide
    # interval's gives none; after a pair plan's labels it says they do not narrow this interval
    from tasks.report import cautions

    wide = SUMMARY | {"selection": sel, "estimate": est, "n_target": 400}
    assert cautions(wide)[0].endswith("disagree on this shift; label a few target rows (--label-budget 50) to know "
                                      "more")
    undecided = wide | {"champion": SUMMARY["champion"] | {"gate_decision": "undecided", "incumbent_version": "1"}}
    first, second = cautions(undecided)
    assert first == "a wide interval: the label-free estimators disagree on this shift"
    assert "--label-budget 50 --label-plan pair" in second
    paired = wide | {"champion": SUMMARY["champion"] | {"gate_decision": "kept", "incumbent_version": "1",
                                                        "labels": 50}}
    assert cautions(paired) == ["a wide interval: the label-free estimators disagree on this shift; the pair's labels "
                                "weigh the two versions, not this accuracy: labels over every candidate "
                                "(--label-budget 50 without --label-plan pair) would narrow it"]


def test_an_undecided_gate_says_which_labels_settle_it() -> None:
    """An undecided gate: the note names the pair plan (shiftlib.decisions.UNDECIDED_LABEL_PLAN, chosen in
    reports/decisions_pair.md) and a budget the batch holds; after labels it says the next round is a larger budget."""
    from tasks.report import cautions

    sel = {"chosen": "LR", "selector": "scv", "agreement": None}
    undecided = SUMMARY["champion"] | {"gate_decision": "undecided", "p_better": 0.7, "incumbent_version": "1"}
    base = SUMMARY | {"selection": sel, "n_target": 30}
    (note,) = cautions(base | {"champion": undecided})
    assert note == ("the gate is undecided: label the rows where the new version and the champion disagree "
                    "(--label-budget 30 --label-plan pair)")
    (later,) = cautions(base | {"n_target": 500, "champion": undecided | {"labels": 40}})
    assert later.endswith("(--label-budget 90 --label-plan pair; 40 labels so far: a larger budget with the filled "
                          "file plans the next round)")  # 40 + 50: a budget the next round can add rows with
    (most,) = cautions(base | {"n_target": 60, "champion": undecided | {"labels": 40}})
    assert "(--label-budget 60 --label-plan pair; 40 labels so far" in most  # at most the batch's rows
    for decided in ("promoted", "kept", "refused"):
        assert cautions(base | {"champion": undecided | {"gate_decision": decided}}) == []
    # a refused first version: nothing serves, and the note says so (helper-31's sweep: the report said nothing)
    no_champion = undecided | {"gate_decision": "refused", "incumbent_version": None, "version": "2"}
    # refused for predicting one class: no label can pass it (item 1)
    (refused,) = cautions(base | {"champion": no_champion | {"new_one_class": True}})  # v2: the version refused
    assert refused == ("nothing serves yet: m v2 was refused (the reason above) and no version is champion, so "
                       "`shiftflow score` has none to use; a later run with other learners (--learners) or more "
                       "source rows may pass the gate")
    # refused on the label-free margin over the rule: target labels decide in its place (FIRST_LABELS_DECIDE)
    (margin,) = cautions(base | {"champion": no_champion | {"new_one_class": False}})
    assert margin == ("nothing serves yet: m v2 was refused (the reason above) and no version is champion, so "
                      "`shiftflow score` has none to use; target labels (--label-budget 30, then --target-labels with "
                      "the filled file) weigh the candidates against the majority-class rule on this batch and decide "
                      "in place of the label-free estimate, and may pass it or another; so may a later run with other "
                      "learners (--learners) or more source rows pass the gate")
    # refused by a pair plan's labels: they judged the label-free choice only; labels over every candidate choose
    (by_labels,) = cautions(base | {"n_target": 500, "champion": no_champion | {"labels": 26}})  # a new plan
    assert by_labels.endswith("no version is champion, so `shiftflow score` has none to use; labels over every "
                              "candidate (--label-budget 50 without --label-plan pair) choose among all of them, and "
                              "another may pass; so may a later run with other learners (--learners) or more source "
                              "rows pass the gate")
    # after 100 pair labels, a plan over every candidate is not offered fewer rows (helper-37 saw 50)
    (after_100,) = cautions(base | {"n_target": 500, "champion": no_champion | {"labels": 100}})
    assert "labels over every candidate (--label-budget 100 without --label-plan pair)" in after_100
    # a first version (no champion) left undecided: the pair is it and the majority-class rule
    (first,) = cautions(base | {"champion": undecided | {"incumbent_version": None, "p_better": float("nan")}})
    assert first == ("the gate is undecided and nothing serves yet: label the rows where the new version and the "
                     "majority-class rule disagree (--label-budget 30 --label-plan pair); the labels then decide "
                     "whether it serves")
    (again,) = cautions(base | {"n_target": 500, "champion": undecided | {"incumbent_version": None, "labels": 50}})
    assert "(--label-budget 100 --label-plan pair; 50 labels so far: a larger budget with the filled file plans the " \
           "next round); the labels then decide whether it serves" in again


def test_summary_says_the_shift_regime_beside_the_overlap() -> None:
    sel = {"chosen": "LR", "selector": "scv", "agreement": None}
    est = {"candidate": "LR", "accuracy": 0.8, "ci_low": 0.75, "ci_high": 0.85, "method": "median", "confidence": 0.95,
           "alert": False, "min_accuracy": None, "overlap": "ok", "regime": "label", "regime_weighted_auc": 0.5034,
           "regime_pvalue": 0.81}
    lines = summary_markdown(SUMMARY | {"selection": sel, "estimate": est}, SCORES[2:]).splitlines()
    i = lines.index("- overlap ok: the source reaches the batch")
    assert lines[i + 1] == ("- shift regime: label shift, re-weighting the classes explains the shift (the domain AUC "
                            "with the source classes re-weighted by the EM prior 0.503, p 0.81); reported only")
    unknown = summary_markdown(SUMMARY | {"selection": sel, "estimate": est | {"regime": "unknown"}}, SCORES[2:])
    assert "shift regime" not in unknown


def test_gate_words_name_what_the_new_version_is_weighed_against() -> None:
    """P is against the champion when there is one, else against the majority-class rule (revisions 7 and 8)."""
    from tasks.report import gate_words

    champ = SUMMARY["champion"] | {"gate_decision": "undecided", "p_better": 0.62, "incumbent_version": "1"}
    assert gate_words(champ) == " (undecided, P(new more accurate) = 0.62)"
    first = champ | {"gate_decision": "promoted", "p_better": 0.97, "incumbent_version": None}
    assert gate_words(first) == " (promoted, P(more accurate than the majority-class rule) = 0.97)"
    assert gate_words(first | {"p_better": float("nan")}) == " (promoted)"
    assert gate_words(SUMMARY["champion"]) == ""


def test_labels_of_a_pair_plan_are_said_to_measure_the_difference_not_the_accuracy() -> None:
    """A pair plan's labels decide the gate; the estimate line stays label-free and the summary says why."""
    from tasks.report import pair_labels_sentence

    sel = {"chosen": "LR", "selector": "scv", "agreement": None}
    champ = SUMMARY["champion"] | {"gate_decision": "promoted", "p_better": 0.97, "incumbent_version": None,
                                   "labels": 50}
    said = ("the 50 target labels were drawn where LR and the majority-class rule disagree: they measure the "
            "difference between the two (the registry's P), not the accuracy of either, so the estimated accuracy "
            "is label-free")
    s = SUMMARY | {"selection": sel, "champion": champ}
    assert pair_labels_sentence(s) == said
    assert f"- target labels: {said}" in summary_markdown(s, SCORES[2:])
    assert "LR and v3 disagree" in pair_labels_sentence(s | {"champion": champ | {"incumbent_version": "3"}})
    stood_in = champ | {"incumbent_version": "3", "rule_label_difference": 0.03, "rule_stood_in": True}
    assert pair_labels_sentence(s | {"champion": stood_in}) == (
        "the 50 target labels were drawn where LR and the majority-class rule disagree (v3 predicts one class, and "
        "the rule stands in for it): they measure the difference between the two (the registry's P), not the "
        "accuracy of either, so the estimated accuracy is label-free")
    three = champ | {"incumbent_version": "3", "rule_label_difference": -0.0412}  # RULE_CONTENDER 'third'
    assert pair_labels_sentence(s | {"champion": three}) == (
        "the 50 target labels were drawn where LR, v3 and the majority-class rule disagree: they measure the "
        "differences among the three (the registry's P, and LR against the rule: -0.041), not the accuracy of any, "
        "so the estimated accuracy is label-free")
    assert pair_labels_sentence(s | {"champion": champ | {"labels": None}}) is None  # no labels
    chose = sel | {"fewlabel": {"p_best": {"LR": 0.9}, "n_labels": 50}}  # a candidates plan: they enter the estimate
    assert pair_labels_sentence(s | {"selection": chose}) is None


def test_a_champion_left_serving_that_nothing_vouches_for_is_named_with_the_labels_that_check_it() -> None:
    """A refused or kept new version leaves the champion serving; when nothing vouches for it on this batch (the
    gate's details["champion_unvouched"]), the note says so and which labels weigh it. Not when labels already
    weighed the pair, nor for promoted / undecided decisions (the undecided note asks for the same labels)."""
    from tasks.report import cautions

    sel = {"chosen": "LR", "selector": "scv", "agreement": None}
    base = SUMMARY | {"selection": sel, "n_target": 200}
    why = "its source does not reach this batch (the gate's domain AUC 0.998 ≥ 0.95)"
    ch = SUMMARY["champion"] | {"gate_decision": "refused", "incumbent_version": "1", "champion_unvouched": why,
                                "reason": "it predicts one class for 99.5% of the batch (≥ 99%)"}
    (note,) = cautions(base | {"champion": ch})
    # what the pair's labels can and cannot say (helper-35 followed the first wording and learnt only v2 − v1)
    assert note == ("v1 serves on, but nothing vouches for it on this batch: its source does not reach this batch "
                    "(the gate's domain AUC 0.998 ≥ 0.95), so its accuracy here is not known. Labels on the rows "
                    "where it and the new version disagree (--label-budget 50 --label-plan pair) weigh the two "
                    "against each other (the reason then gives their difference), not either against the "
                    "majority-class rule; `shiftflow champion --model m --set VERSION` serves another version by hand")
    assert cautions(base | {"champion": ch | {"gate_decision": "kept"}}) == [note]
    assert cautions(base | {"champion": ch | {"champion_unvouched": None}}) == []
    # after the labels: the champion still serves, and the note leaves the next step (helper-36)
    assert cautions(base | {"champion": ch | {"labels": 50}}) == [
        "v1 serves on, and nothing vouches for it on this batch: its source does not reach this batch (the gate's "
        "domain AUC 0.998 ≥ 0.95); the 50 target labels weighed it against the new version (the reason above gives "
        "what they showed). `shiftflow champion --model m --set VERSION` serves another version by hand; a run "
        "with other learners (--learners) may pass the gate"]
    stood = cautions(base | {"champion": ch | {"labels": 50, "rule_stood_in": True}})[0]
    assert "the 50 target labels weighed the new version against the majority-class rule in its stead" in stood
    assert cautions(base | {"champion": ch | {"gate_decision": "promoted"}}) == []
    # a champion that predicts one class: the pair plan puts the majority-class rule in its place (RULE_CONTENDER)
    one = ch | {"champion_one_class": True, "champion_unvouched": "it predicts one class for 100.0% of the batch (≥ 99%)"}
    assert cautions(base | {"champion": one}) == [
        "v1 serves on, but nothing vouches for it on this batch: it predicts one class for 100.0% of the batch "
        "(≥ 99%), so its accuracy here is not known. Labels on the rows where the new version and the majority-class "
        "rule disagree (--label-budget 50 --label-plan pair) weigh the new version against the rule, which stands in "
        "for v1 (it predicts one class); `shiftflow champion --model m --set VERSION` serves another version by hand"]
    (undecided,) = cautions(base | {"champion": one | {"gate_decision": "undecided"}})
    assert undecided == ("the gate is undecided: label the rows where the new version and the majority-class rule "
                         "disagree (--label-budget 50 --label-plan pair); v1 predicts one class, so the rule stands in "
                         "for it and the labels weigh the new version against the rule")
