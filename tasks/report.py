"""The run summary: one Markdown page (the Prefect artifact ``retrain-summary``) from the flow's summary dict."""

from __future__ import annotations

from typing import Any

from shiftlib.decisions import RULE_CONTENDER, UNDECIDED_LABEL_PLAN
from shiftlib.selection.fewlabel import OVERCONFIDENT_BELOW
from tasks.estimation import summary_lines
from tasks.ingest import label_rule_sentence

#: an interval at least this wide says little about the served model's accuracy; the summary says so
WIDE_INTERVAL = 0.5


def target_accuracies(s: dict[str, Any]) -> dict[str, float]:
    """Each candidate's accuracy on the target's held-out labels (evaluation stage); empty without them."""
    return {r["learner"]: r["target_accuracy"] for r in s.get("target_scores") or []}


def cautions(s: dict[str, Any]) -> list[str]:
    """Sentences the closing report and the run summary add under the estimate: an interval at least
    ``WIDE_INTERVAL`` wide (unless target labels were given, to choose or to evaluate: then they are the better
    word), an undecided gate (with the labels that would settle it: a pair plan, ``reports/decisions_pair.md``; for a
    first version, the pair of it and the majority-class rule), a refused first version (nothing serves), a
    champion left serving by a refused or kept new version while nothing vouches for it on this batch, a label
    that follows exactly from a few source columns (the ingest stage's check), and a chosen candidate that predicts
    one class for every target row (before any recalibration; its accuracy is then that class's share)."""
    out = []
    ch = s.get("champion") or {}

    def budget(so_far: int = 0) -> int:  # a label budget the batch can hold (1 ≤ b ≤ its rows), 50 beyond so_far
        return min(50 + so_far, s.get("n_target") or 50 + so_far)

    def new_plan_budget() -> int:  # a plan over every candidate after a pair's labels: no fewer rows than those
        return min(max(50, int(ch.get("labels") or 0)), s.get("n_target") or 50)  # (helper-37: 50 after 100)

    est = s.get("estimate") or {}
    labeled = s["selection"].get("fewlabel") or s.get("target_scores")
    if est and est["ci_high"] - est["ci_low"] >= WIDE_INTERVAL and not labeled:
        wide = "a wide interval: the label-free estimators disagree on this shift"
        if ch.get("labels"):  # a pair plan's: they weigh the two versions, not this accuracy (pair_labels_sentence)
            out.append(f"{wide}; the pair's labels weigh the two versions, not this accuracy: labels over every "
                       f"candidate (--label-budget {new_plan_budget()} without --label-plan pair) would narrow it")
        elif ch.get("gate_decision") == "undecided":  # the note below asks for the labels that settle the gate
            out.append(wide)
        else:
            out.append(f"{wide}; label a few target rows (--label-budget {budget()}) to know more")
    if ch.get("gate_decision") == "undecided":  # what settles it: labels where the two disagree
        flags = (f"--label-budget {budget(int(ch.get('labels') or 0))} --label-plan {UNDECIDED_LABEL_PLAN}"
                 + (f"; {ch['labels']} labels so far: a larger budget with the filled file plans the next round"
                    if ch.get("labels") else ""))
        if ch.get("incumbent_version") is None:  # a first version: the pair is it and the majority-class rule
            out.append("the gate is undecided and nothing serves yet: label the rows where the new version and the "
                       f"majority-class rule disagree ({flags}); the labels then decide whether it serves")
        elif _rule_stands_in(ch):
            out.append(f"the gate is undecided: label the rows where the new version and the majority-class rule "
                       f"disagree ({flags}); v{ch['incumbent_version']} predicts one class, so the rule stands in "
                       "for it and the labels weigh the new version against the rule")
        else:
            out.append(f"the gate is undecided: label the rows where the new version and the champion disagree "
                       f"({flags})")
    if ch.get("gate_decision") == "refused" and ch.get("incumbent_version") is None:  # nothing serves: say so
        other = (f"labels over every candidate (--label-budget {new_plan_budget()} without --label-plan "
                 "pair) choose among all of them, and another may pass; so may "
                 if ch.get("labels") else "")  # a pair plan's labels judged only the label-free choice
        if not ch.get("labels") and not ch.get("new_one_class"):  # refused on the label-free margin: labels decide
            other = (f"target labels (--label-budget {budget()}, then --target-labels with the filled file) weigh "
                     "the candidates against the majority-class rule on this batch and decide in place of the "
                     "label-free estimate, and may pass it or another; so may ")
        out.append(f"nothing serves yet: {ch.get('registered_model', 'the model')} v{ch.get('version', '?')} was "
                   "refused (the reason above) and no version is champion, so `shiftflow score` has none to use; "
                   f"{other}a later run with other learners (--learners) or more source rows "
                   f"{'' if other else 'may '}pass the gate")
    why = ch.get("champion_unvouched")  # a refused or kept new version leaves it serving; labels would weigh both
    by_hand = f"`shiftflow champion --model {ch.get('registered_model', 'NAME')} --set VERSION` serves another version"
    serves_on = bool(why and ch.get("incumbent_version") and ch.get("gate_decision") in ("refused", "kept"))
    if serves_on and ch.get("labels"):  # they came and the champion still serves (helper-36: the note went, no next step left)
        weighed = ("the new version against the majority-class rule in its stead" if ch.get("rule_stood_in")
                   else "it against the new version")
        out.append(f"v{ch['incumbent_version']} serves on, and nothing vouches for it on this batch: {why}; the "
                   f"{ch['labels']} target labels weighed {weighed} (the reason above gives what they showed). "
                   f"{by_hand} by hand; a run with other learners (--learners) may pass the gate")
    elif serves_on:
        weigh = ("Labels on the rows where the new version and the majority-class rule disagree (--label-budget "
                 f"{budget()} --label-plan {UNDECIDED_LABEL_PLAN}) weigh the new version against the rule, which "
                 f"stands in for v{ch['incumbent_version']} (it predicts one class)" if _rule_stands_in(ch) else
                 "Labels on the rows where it and the new version disagree "
                 f"(--label-budget {budget()} --label-plan {UNDECIDED_LABEL_PLAN}) weigh the two against each "
                 "other (the reason then gives their difference), not either against the majority-class rule")
        out.append(f"v{ch['incumbent_version']} serves on, but nothing vouches for it on this batch: {why}, so "
                   f"its accuracy here is not known. {weigh}; {by_hand} by hand")
    if s.get("label_columns"):  # the ingest stage's check (tasks.ingest.label_rule_sentence)
        out.append(label_rule_sentence(list(s["label_columns"]), *(s.get("label_units") or ())))
    chosen, classes = s["selection"]["chosen"], s.get("classes") or []
    predicted = (s.get("predicted_classes") or {}).get(chosen)
    if predicted is not None and len(predicted) == 1 and len(classes) > 1 and not s.get("recalibration"):
        out.append(f"{chosen} predicts {classes[predicted[0]]!r} for every target row: its accuracy is that class's "
                   "share (a rare class is never found; see --undersample)")
    return out


def summary_markdown(s: dict[str, Any], scores: list[dict[str, Any]]) -> str:
    """The run's one-page summary (Prefect artifact): drift, weights, selection table, choice, ids."""
    d = s["drift"]
    first, est_bullet = summary_lines(s.get("estimate"), labeled=has_target_labels(s))
    lines = [*first, "# shiftflow retrain", "",
             f"- **choice: {s['selection']['chosen']}** (selector `{s['selection']['selector']}`)",
             *_fewlabel_bullet(s["selection"]),
             *est_bullet,
             *([] if (pair := pair_labels_sentence(s)) is None else [f"- target labels: {pair}"]),
             *(f"- **note**: {c}" for c in cautions(s)),
             f"- drift: {'**detected**' if d['drifted'] else 'not detected'} (domain AUC {d['domain_auc']:.3f}, "
             f"MMD p = {d['mmd_pvalue']:.3g}); drifting features: {', '.join(d['drifted_features'][:5]) or 'none'}",
             f"- weighting: {s['weighting']}"]
    for w in s["weights"]["summary"] if s["weights"] else []:
        lines.append(f"  - {w['method']}: ESS {w['ess']:.1f}, max {w['max']:.2f}, "
                     f"MMD² {w['mmd2_before']:.4g} → {w['mmd2_after']:.4g}")
    for n, why in (s.get("skipped_candidates") or {}).items():
        lines.append(f"- **skipped candidate** {n}: {why}")
    if s["recalibration"]:
        m = s["recalibration"]["metrics"]
        lines.append(f"- recalibration (undersampled, US eq. 9): Brier p_s {m['calibration.brier_raw']:.4f} → "
                     f"p′ {m['calibration.brier_corrected']:.4f}; AUC {m['calibration.auc']:.3f}; "
                     f"τ′ = {m['calibration.tau_prime']:.3f}")
    c = s["champion"]
    lines += [f"- registry: `{c['registered_model']}` v{c['version']} → **{c['decision']}**{gate_words(c)} ({c['reason']})",
              f"- run folder: `{s['run_dir']}`", f"- MLflow parent run: `{s['mlflow_parent_run_id']}`",
              f"- reused stages: {', '.join(s['reused_stages']) or 'none'}",
             "- time per stage: " + ", ".join(f"{k} {v:.1f} s" for k, v in s.get("timings", {}).items()), ""]
    selectors = sorted({r["selector"] for r in scores})
    truth = target_accuracies(s)
    head = ["candidate", "source-CV acc"] + [f"{x} score (rank)" for x in selectors]
    if truth:
        head.append("target accuracy (held out)")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["learner"], r["selector"]): r for r in scores}
    for n, cv in s["learners"].items():
        cells = [n, f"{cv['accuracy']:.3f}"]
        for x in selectors:
            r = by.get((n, x))
            if r is None or r["score"] is None:
                cells.append("")
                continue
            iv = ""
            if x == "fewlabel":  # its per-candidate intervals do not hold for the level; P(best) is what it knows
                pb = (s["selection"].get("fewlabel") or {}).get("p_best", {}).get(n)
                iv = "" if pb is None else f", P(best) {pb:.2f}"
            elif r.get("interval_low") is not None and r["interval_low"] == r["interval_low"]:
                iv = f" [{r['interval_low']:.3f}, {r['interval_high']:.3f}]"
            cells.append(f"{r['score']:.3f}{iv} ({r['rank']})")
        if truth:
            cells.append(f"{truth.get(n, float('nan')):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    if s["selection"]["agreement"]:
        lines += ["", "Selector agreement with the held-out target labels:", "",
                  "| selector | pairwise accuracy | Kendall τ | regret |", "|---|---|---|---|"]
        for a in s["selection"]["agreement"]:
            lines.append(f"| {a['selector']} | {a['pairwise_accuracy']} | {a['kendall_tau']} | {a['regret']} |")
    return "\n".join(lines)


def gate_words(champion: dict[str, Any]) -> str:
    """`` (undecided, P(new more accurate) = 0.62)``: the gate's decision and the probability it rests on, after the
    alias; without a champion (a first version) P is against the majority-class rule."""
    gate = champion.get("gate_decision")
    if not gate:
        return ""
    p = champion.get("p_better")
    what = ("new more accurate" if champion.get("incumbent_version") is not None
            else "more accurate than the majority-class rule")
    return f" ({gate}" + (f", P({what}) = {p:.2f}" if p is not None and p == p else "") + ")"


def has_target_labels(s: dict[str, Any]) -> bool:
    """Whether the run read target labels to choose the model (a plan over every candidate) or to decide the gate
    (a pair plan), or the target carried its own (held out: the measured accuracy says more than advice to label
    rows, as :func:`cautions` has it for a wide interval)."""
    return bool(s["selection"].get("fewlabel") or (s.get("champion") or {}).get("labels") or s.get("target_scores"))


def _rule_stands_in(ch: dict[str, Any]) -> bool:
    """Whether a pair plan beside this run's champion puts the majority-class rule in its place (it predicts one
    class: ``shiftlib.decisions.RULE_CONTENDER`` 'one_class')."""
    return bool(ch.get("champion_one_class")) and RULE_CONTENDER == "one_class"


def pair_labels_sentence(s: dict[str, Any]) -> str | None:
    """What the labels of a pair plan measure, or None: they were drawn where the new version and the champion (and
    the majority-class rule; for a first version the rule alone) disagree, so they weigh them against each other (the gate's
    P) and leave the new version's own accuracy, which rests mostly on the rows where the two agree, to the
    label-free estimate. None without labels, or with labels of a plan over every candidate (those choose the model
    and enter its estimate)."""
    n, champ = s["champion"].get("labels"), s["champion"]
    if not n or s["selection"].get("fewlabel"):
        return None
    chosen, d_rule = s["selection"]["chosen"], champ.get("rule_label_difference")
    if champ.get("rule_stood_in"):  # the rule in place of a one-class champion (RULE_CONTENDER 'one_class')
        return (f"the {n} target labels were drawn where {chosen} and the majority-class rule disagree (v"
                f"{champ['incumbent_version']} predicts one class, and the rule stands in for it): they measure the "
                "difference between the two (the registry's P), not the accuracy of either, so the estimated "
                "accuracy is label-free")
    if d_rule is not None and champ.get("incumbent_version") is not None:  # the rule, a third contender
        return (f"the {n} target labels were drawn where {chosen}, v{champ['incumbent_version']} and the "
                f"majority-class rule disagree: they measure the differences among the three (the registry's P, and "
                f"{chosen} against the rule: {d_rule:+.3f}), not the accuracy of any, so the estimated accuracy is "
                "label-free")
    other = "the majority-class rule" if champ.get("incumbent_version") is None else f"v{champ['incumbent_version']}"
    return (f"the {n} target labels were drawn where {chosen} and {other} disagree: they measure "
            "the difference between the two (the registry's P), not the accuracy of either, so the estimated "
            "accuracy is label-free")


def fewlabel_sentence(selection: dict[str, Any]) -> str | None:
    """How sure the labels make the choice (the fewlabel posterior's P(best) of the chosen candidate), or None."""
    fl = selection.get("fewlabel")
    if not fl or selection["chosen"] not in fl["p_best"]:
        return None
    caution = (f"; below {OVERCONFIDENT_BELOW} labels it is over-confident, see reports/label_budget_intervals.md"
               if fl["n_labels"] < OVERCONFIDENT_BELOW else "")
    return (f"P({selection['chosen']} is the best) = {fl['p_best'][selection['chosen']]:.2f} from {fl['n_labels']} "
            f"labels (fewlabel posterior{caution})")


def _fewlabel_bullet(selection: dict[str, Any]) -> list[str]:
    sentence = fewlabel_sentence(selection)
    return [] if sentence is None else [f"- target labels: {sentence}"]
