"""The label-budget study's rules and measurements, in the order they were fixed, each written and committed
before any result of it was seen: one text, ``RULES``. The reports quote their rule from it verbatim
(``label_budget.md`` the whole text, each fresh round and the detectability measurement its own paragraph), so
a rule is never restated in two places. Cases, commands and outputs: ``replications.replicate_label_budget``.
"""

from __future__ import annotations

RULES = """\
**Rule, fixed before any result of this script was seen** (written here and at the top of the report):

* Method settings (``shiftlib.selection.fewlabel``): pair floor 0.1, defensive mixture 0.1 with the
  uniform distribution over the disagreement rows, τ floor 0.01, prior = stratified 10-fold source CV.
  Labels are asked in nested rounds at the checkpoints 10, 25, 50, 100, 200 (round sizes 10, 15, 25,
  50, 100): each round is ``plan_labels(budget=b, already_labeled=(previous plan, its labels))``, as a
  person who labels 10 rows, looks, and labels up to 25, and so on.
* Selectors per budget b: ``fewlabel`` (the plan's b rows, ``fewlabel_select``); ``uniform`` (b target
  rows drawn uniformly at random, each learner's accuracy on them); ``trcv_l`` (TrCV eq. 14 with the
  fewlabel plan's rows as L, the rest of the batch as U, KMM weights, k = ``--trcv-k`` folds); ``cv`` (the
  same 10-fold source CV, no labels, identical at every b).
* Truth: each learner fitted on the source sample; accuracy on every target-group row that the selector
  did not see labeled (for ``cv``: the whole target group).
* Measures: pairwise-order accuracy (``shiftlib.selection.agreement``; true gap < 0.005 is a tie and not
  counted, undecided counts as wrong), pooled over runs per group; regret of the selected learner.
* Success (the issue's "Done when"): in each group, ``fewlabel`` ≥ ``cv`` at every b ≥ 25, and ≥ 0.90
  pairwise-order accuracy at b = 100.
* Second rule, added 2026-11-26 before any result of it was seen (the rows above were already known:
  fewlabel 0.782 vs cv 0.806 on natural shifts at b = 25, with the prior's share about 0.01).
  ``fewlabel_guard`` (``shiftlib.selection.fewlabel.guarded_select``) keeps CV's order of a pair unless the
  fewlabel posterior (the same ``fewlabel_select`` result, no other input) gives the opposite order a
  probability ≥ 0.9; then the labels' order stands. Learners are scored by the pairs they win (Copeland),
  ties broken by the fewlabel posterior mean; a pair CV scores exactly equal takes the posterior's order.
  The level 0.9 is fixed in advance, not tuned: it is a one-sided test at 10 %, so where CV orders a pair
  rightly and the posterior is calibrated, the labels overturn it with probability at most about 0.1 —
  the guard can lose at most about a tenth of the pairs CV gets right — while every reversal the labels
  establish clearly is kept. The τ estimate is not changed: it already is the method-of-moments estimate
  with both sampling variances subtracted (squared distance − tr V_P − tr V_L, floored at 0.01²), the
  unbiased-minus-variance form, so there is no fix to make there without looking at results.
  Same cases, seeds, budgets and truth; ``fewlabel_guard`` is judged by the same success criterion. It
  replaces ``fewlabel`` as the deciding rule only if it meets "≥ cv at every b ≥ 25" in both groups and
  its b = 100 accuracy is within 0.02 of fewlabel's in both; otherwise fewlabel stays, and this says so.
* Third rule, added 2026-11-26 09:23 UTC (commit 1834315) before any result of it was seen (known then: fewlabel_guard
  0.910 natural / 0.885 trcv_pairs at b = 100; CV's order is what the guard keeps, and CV scores 0.700 on
  the TrCV pairs, whose class prior moves strongly: 18 % → 40 % bad, 43 % → 7 % churn).
  ``fewlabel_guard_ls`` is the same guard (level 0.9, same plan rows, same labels) with a better prior:
  ``cv_ls`` (``shiftlib.selection.labelshift.label_shift_cv``), the same 10-fold stratified source CV
  with each fold's accuracy re-weighted to the target class prior estimated without labels by BBSE
  (Lipton, Wang & Smola 2018; the prior-shift correction of Saerens et al. 2002); the fewlabel posterior
  that the guard consults uses ``cv_ls`` as its prior too (its weight still learned through τ²). ``cv_ls``
  alone is reported as a no-label selector. A third group, **feature_bias**, is added (the papers'
  feature biases on the binary sets of ``replications.replicate_estimation``: breast_cancer, Pima,
  spam7 × rt_sort, kmm_threshold, kmm_distance; seeds 0–1 for time; batch ≤ ``--n-max`` rows of the
  biased target holdout, truth = every holdout row not labeled). ``fewlabel_guard_ls`` replaces
  ``fewlabel_guard`` as the deciding rule only if (a) in natural and trcv_pairs it is ≥ cv at every
  b ≥ 25 and ≥ 0.90 at b = 100, and (b) in every group (feature_bias included) it is nowhere below
  ``fewlabel_guard`` by more than 0.02 at any b ≥ 25. Otherwise ``fewlabel_guard`` stays, and this says
  so. Nothing else is varied (no level, floor or mixture is changed).
* Fourth rule, added 2026-11-26 09:43 UTC (commit a3ba137) after the third rule's run (known then: ``fewlabel_guard_ls``
  failed the third rule; BBSE's class shares were far off; the post-hoc ``--ceiling`` run showed CV
  re-weighted to the batch's *true* class shares ordering 0.870 / 0.727 / 0.838 of pairs on natural /
  TrCV pairs / feature bias against plain CV's 0.806 / 0.700 / 0.763), before any result of it was seen.
  ``fewlabel_guard_lp`` is the same guard with the prior ``cv_lp``: the same per-fold class recalls,
  re-weighted to the batch's class shares estimated from the plan's labels at that budget
  (``shiftlib.selection.labelshift.labeled_class_prior``: Horvitz–Thompson over the disagreement rows,
  the candidates' mean class probabilities on the agreement rows); the fewlabel posterior the guard
  consults uses ``cv_lp`` as its prior too. ``cv_lp`` alone is reported (it has seen the labels, so its
  truth excludes them). It replaces ``fewlabel_guard`` as the deciding rule only under the third rule's
  criterion ((a) and (b) above, with ``fewlabel_guard_lp`` in place of ``fewlabel_guard_ls``). The prior
  then uses the labels twice (its class shares and the posterior's label estimate), which the posterior
  does not model; that is accepted for this test and stated here.
* Fifth rule, added 2026-11-26 12:03 UTC, committed before any result of it was seen (known then: the
  fourth rule's run; ``fewlabel_guard`` at b = 25 / 50 / 100 orders natural 0.806 / 0.850 / 0.910,
  trcv_pairs 0.762 / 0.834 / 0.885, feature_bias 0.753 / 0.821 / 0.832 of the pairs, cv 0.806 / 0.700 /
  0.763; so it meets the issue's criterion in one group, natural; and the post-hoc ``--ceiling`` run:
  all 400 batch rows labeled order 0.894 of the TrCV pairs). Only the **label estimate** changes: the
  Horvitz–Thompson sum over the drawn disagreement rows is replaced by the model-assisted difference
  estimator (Särndal, Swensson & Wretman 1992, §6.3; prediction-powered inference, Angelopoulos et al.
  2023; Kossen et al. 2022): per round ``Σ_{labeled before} c + Σ_{R_r} ĉ + Σ_{S_r} (c − ĉ)/π`` over
  the round's population R_r, rounds averaged by size as before, variance the Hansen–Hurwitz variance of
  the residuals c − ĉ (``fewlabel_select(..., estimator=...)``). ``fewlabel_dm``: the posterior with
  ``estimator="difference"``, surrogate ĉ_ij = p̄(ŷ_j(x_i) | x_i), the candidates' mean probability
  the plan already uses (no labels, strictly unbiased); reported only. ``fewlabel_guard_dm``: the guard
  (level 0.9, prior = the same 10-fold CV, τ² as before) over ``fewlabel_dm``. ``fewlabel_guard_dmc``:
  the same with ``estimator="difference_cal"``, p̄ recalibrated by a 1/π-weighted Platt fit (sklearn
  ``LogisticRegression``, default C = 1) of c on logit p̄ over the labels of the *earlier* rounds only
  (round 1 uses p̄), so each round stays unbiased given the ones before. Every selector sees the same
  plan rows and labels: the plan is still drawn with the Horvitz–Thompson posterior's pair weights
  (``plan_labels(estimator="ht")``). **Adoption**, judged on this design (``--design batch400``) only:
  ``fewlabel_guard_dm`` replaces ``fewlabel_guard`` as the deciding rule only if (a) it meets the
  issue's criterion (≥ cv at every b ≥ 25 and ≥ 0.90 at b = 100) in **more** of the three groups
  (natural, trcv_pairs, feature_bias) than ``fewlabel_guard`` does in the same run, and (b) in every
  group it is nowhere below ``fewlabel_guard`` by more than 0.02 at any b ≥ 25. ``fewlabel_guard_dmc``
  is judged by the same criterion only if ``fewlabel_guard_dm`` fails it (fixed order: the label-free
  surrogate first); if ``fewlabel_guard_dm`` passes, ``fewlabel_guard_dmc`` is reported only. If one is
  adopted, its ``estimator`` becomes the default of ``fewlabel_select`` in shiftlib (so the flow's
  ``fewlabel`` selector uses it); ``plan_labels`` keeps ``"ht"`` for its pair weights, as measured here.
  Otherwise the default stays ``"ht"``, and this says so. Nothing else is varied.
* Sixth rule, added 2026-11-26 12:26 UTC after the fifth rule's runs on both designs (known then: their
  results, in the report below) and committed before any result of it was seen. After those runs, the
  label estimate's variance was found to normalise the Hansen–Hurwitz draw probabilities over the
  *drawn* rows (π_k/Σ_S π) instead of the round's population (π_k/n). That scales the variance by
  about (mean_S π)²: exact enumeration of the systematic design on three small populations gives
  E[V̂]/Var = 0.09–0.59, against 1.27–1.72 (conservative, as HH is for πps) with the corrected form. In
  the runs the posterior s.d. of a contrast was about 0.004 at 25 labels on natural shifts (a binomial
  back-of-the-envelope gives about 0.1), and ten times smaller again in the fullbatch design, whose π
  are ten times smaller. So the posterior the guard consults, and the τ² that weighs the prior, rested
  on a variance far too small in every rule so far. The sixth rule changes only that variance
  (``fewlabel_select(..., variance="hh")``): ``fewlabel_hh`` (the Horvitz–Thompson posterior with it,
  reported only), ``fewlabel_guard_hh`` (the guard over it: level 0.9, prior = the same CV, τ² by the
  same moment formula) and ``fewlabel_guard_dm_hh`` (the same with the difference estimate). Same plan
  rows and labels (the plan is still drawn with the old posterior's pair weights). **Adoption**, judged
  on ``--design batch400`` only, by the fifth rule's criterion: ``fewlabel_guard_hh`` replaces
  ``fewlabel_guard`` only if (a) it meets the issue's criterion in more of the three groups than
  ``fewlabel_guard`` does and (b) it is nowhere below ``fewlabel_guard`` by more than 0.02 at any
  b ≥ 25 in any group; ``fewlabel_guard_dm_hh`` is judged only if ``fewlabel_guard_hh`` fails. If one
  is adopted, ``variance="hh"`` (and, for the second, ``estimator="difference"``) become the defaults
  of ``fewlabel_select``. If neither is, the defaults stay as measured, and this report says that the
  intervals and ``p_better`` of ``fewlabel_select`` then come from the underestimated variance.
* Variance correction, 2026-11-26 12:58 UTC: a decision of the lead engineer, not a measured rule, written
  here before the run that reports it. The sixth rule did not adopt ``variance="hh"``, but ``"sample"`` is
  a defect, not a method: the posterior's intervals and ``p_better`` are outputs people read, and the
  guard's level-0.9 argument assumes a calibrated posterior; with ``"sample"`` the s.d. of a contrast was
  about ten times too small. So ``"hh"`` becomes the library's default in both ``plan_labels`` (the pair
  weights of later rounds) and ``fewlabel_select``, whatever its ordering accuracy, and the guard (level
  0.9, prior CV) stays the deciding rule. ``fewlabel_shipped`` measures what the flow now runs: its own
  nested plan chain drawn with the defaults, and the guard over ``fewlabel_select``'s defaults. Every
  earlier selector keeps ``variance="sample"`` explicitly, so its rows reproduce.
* Seventh rule, added 2026-11-26 14:48 UTC and committed before any result of it was seen. Known then:
  every table of this report, among them ``fewlabel_hh`` (the unguarded posterior with the corrected
  variance, over the old plan rows), which at b = 25 / 50 / 100 orders natural 0.798 / 0.906 / 0.929,
  trcv_pairs 0.744 / 0.830 / 0.881 and feature_bias 0.784 / 0.811 / 0.840 of the pairs, against
  ``fewlabel_guard_hh``'s 0.819 / 0.876 / 0.901, 0.767 / 0.816 / 0.839 and 0.794 / 0.826 / 0.847. Because
  those draws have been seen, this rule is judged **only on fresh draws** (``--fresh``): seeds 3, 4, 5 of
  the natural and trcv_pairs cases and seeds 2, 3 of the feature-bias cases (new source samples, batches,
  biased splits and plan draws of the same cases). Candidate: ``fewlabel_bayes``, the shipped plan chain
  and posterior (library defaults), each pair ordered by the posterior itself (the more probable order,
  i.e. ranking by the posterior mean), no guard. The reason is fixed here, not measured: for a calibrated
  posterior that already holds the CV prior (weighted through τ²), ordering each pair by its more
  probable order is the Bayes decision for pairwise-order accuracy; the guard was added (second rule) when
  the posterior was about ten times over-confident, and over the corrected posterior it counts the prior
  twice. **Adoption**: ``fewlabel_bayes`` replaces the guard as the flow's deciding rule only if, on the
  fresh draws, (a) its mean pairwise-order accuracy over the three groups and b ∈ {25, 50, 100} is higher
  than ``fewlabel_shipped``'s, and (b) in every group and at every b ≥ 25 where ``fewlabel_shipped`` is
  ≥ ``cv``, ``fewlabel_bayes`` is ≥ ``cv`` too. Otherwise the guard stays, and the fresh report says so.
  Reported beside them on the same draws: ``cv`` and ``uniform``; the issue's criterion for both. Outputs
  ``label_budget_fresh.{md,csv,png}``; nothing else is varied.
* Eighth rule, added 2026-11-26 14:57 UTC and committed before any result of it was seen. Known then:
  the seventh rule's fresh batch400 draws (``label_budget_fresh.md``: the unguarded posterior and the guard
  tie, 0.834 vs 0.836, and the guard stays); and development runs on the **seen** seeds (0–2; feature bias
  0–1), not written to any report, comparing on the shipped plan chain the guard and the unguarded
  posterior, each with the Horvitz–Thompson and the difference label estimate. On the fullbatch design
  (natural and trcv_pairs, seeds 0–1) the unguarded posterior with the difference estimate ordered
  0.804 / 0.833 / 0.910 (natural) and 0.829 / 0.859 / 0.893 (trcv_pairs) of the pairs at b = 25 / 50 / 100
  against the guard's 0.779 / 0.833 / 0.835 and 0.788 / 0.819 / 0.827; on feature bias they were within
  0.03 of each other. Those runs also showed why the batch400 design caps every method: there, ordering by
  the learners' *true* accuracy on all 400 batch rows orders only 0.884 (natural), 0.905 (trcv_pairs) and
  0.754 (feature bias) of the pairs at b = 100, because the truth is the much larger target group less the
  labeled rows, while on the fullbatch design the same ordering reaches 0.97–1.0. The flow's estimand is
  the accuracy on the batch it is given, which is what the fullbatch design scores (the issue's
  definition), so this rule is judged there, on **fresh draws**: seeds 6, 7, 8 of the natural and
  trcv_pairs cases and seeds 4, 5 of the feature-bias cases (``--fresh eighth``; both designs are run on
  these seeds). Candidates, in this fixed order: ``fewlabel_bayes_dm`` (the shipped plan chain; the
  posterior of ``fewlabel_select`` with ``estimator="difference"``; each pair ordered by the posterior, no
  guard), then ``fewlabel_bayes`` (the same with the Horvitz–Thompson estimate, judged only if the first
  fails). The reasons are fixed here: the Bayes decision (seventh rule), and the difference estimator is
  unbiased with a label-free surrogate and has a smaller variance when the surrogate tracks c, which matters
  most when the batch is large and each label stands for many rows. **Adoption** of a candidate: (a) on the
  fullbatch draws, its mean pairwise-order accuracy over the three groups and b ∈ {25, 50, 100} is higher
  than ``fewlabel_shipped``'s; (b) on the fullbatch draws, in every group and at every b ≥ 25 where
  ``fewlabel_shipped`` is ≥ ``cv``, the candidate is ≥ ``cv`` too; (c) on the batch400 draws of the same
  seeds, its mean over the groups and b ∈ {25, 50, 100} is not below ``fewlabel_shipped``'s by more than
  0.02. If one is adopted, the flow orders the candidates by the fewlabel posterior without the guard, and
  for the first ``estimator="difference"`` becomes ``fewlabel_select``'s default (``plan_labels`` keeps the
  Horvitz–Thompson posterior for its pair weights, as measured). Otherwise the guard stays, and the
  report says so. Outputs ``label_budget_fresh8{,_fullbatch}.{md,csv,png}``; nothing else is varied.
* ``fewlabel_now``, added 2026-11-26 after the eighth rule was adopted (reported only; these seeds decide
  nothing any more): what the flow runs since then, on ``fewlabel_shipped``'s plan chain: the posterior
  of ``fewlabel_select`` with the library's defaults (difference estimate, "hh" variance) ordered by
  ``decide`` (the posterior's own order).
* Ninth rule, added 2026-11-26 17:35 UTC and committed before any result of it was seen. Why: the shipped
  posterior's contrast intervals cover only 0.60–0.80 at b = 10 and under 0.90 at b = 25–50 on the eighth
  rule's fresh draws (``label_budget_intervals.md``), so the P(best) people read is over-confident. The
  reason fixed here: the Hansen–Hurwitz variance of n draws is unbiased but skewed at small n (most draws
  give too small a value), and it both weighs the labels and enters τ²'s moment equation. Candidate
  ``fewlabel_modelvar``: ``fewlabel_now``'s plan chain and ``fewlabel_select`` with ``variance="hh_model"``:
  each round's variance is the Loewner maximum of the Hansen–Hurwitz estimate and the anticipated variance
  under the surrogate model (y ~ p̄; Särndal, Swensson & Wretman 1992, §12.2), while τ²'s moment equation
  keeps the Hansen–Hurwitz estimate (an upward-biased variance there would shrink τ² and over-trust the
  prior); ordered by ``decide`` (the posterior). Known then, from development runs on the **seen** seeds
  (0–2; feature bias 0–1), not in any report: on the fullbatch design its contrast coverage at
  b = 10 / 25 / 50 was 0.876 / 0.883 / 0.835 (natural), 0.885 / 0.921 / 0.944 (trcv_pairs) and
  0.947 / 0.931 / 0.947 (feature bias), against ``fewlabel_now``'s 0.641 / 0.775 / 0.794,
  0.611 / 0.825 / 0.901 and 0.780 / 0.839 / 0.929; its mean pairwise-order accuracy over the groups and
  b ∈ {25, 50, 100} was 0.825 against 0.828 (fullbatch) and 0.832 against 0.841 (batch400, natural and
  trcv_pairs). A variant that also put the floored variance into τ²'s moments was run there (coverage
  0.778 / 0.778 / 0.876 at b = 10, mean ordering 0.826 fullbatch) and is not a candidate. Judged on **fresh
  draws**: seeds 9, 10, 11 of the natural and trcv_pairs cases and seeds 6, 7 of the feature-bias cases
  (``--fresh ninth``; both designs run on these seeds). **Adoption**: (a) on the fullbatch draws, the mean
  over the three groups of each group's contrast coverage (95 % intervals of θ_a − θ_b against the batch's
  true difference, pooled over runs, pairs and b ∈ {10, 25, 50}) is higher than ``fewlabel_now``'s and at
  least 0.85; (b) on the fullbatch draws, its mean pairwise-order accuracy over the groups and
  b ∈ {25, 50, 100} is not below ``fewlabel_now``'s by more than 0.01; (c) on the fullbatch draws, in every
  group and at every b ≥ 25 where ``fewlabel_now`` is ≥ ``cv``, it is ≥ ``cv`` too; (d) on the batch400
  draws, its mean over the groups and b ∈ {25, 50, 100} is not below ``fewlabel_now``'s by more than 0.02.
  If adopted, ``"hh_model"`` becomes ``fewlabel_select``'s default variance (``plan_labels`` keeps
  ``"hh"`` for its pair weights; nothing in the plan is varied), and ``OVERCONFIDENT_BELOW`` becomes the
  smallest budget from which, at it and every larger budget, the adopted posterior's fullbatch contrast
  coverage is ≥ 0.90 in every group (10 removes the caution). Otherwise nothing changes and the report says
  so. Outputs ``label_budget_fresh9{,_fullbatch}.{md,csv,png}``; nothing else is varied.
* Tenth: a **measurement, not a rule** (nothing is adopted or changed by it), added 2026-11-26 22:55 UTC
  and committed before any result of it was seen. Why: the feature-bias group's batches are ≤ 400 rows of
  holdouts of 266–600 rows, with 30–120 disagreement rows per run, so at 100 labels the plan has labeled
  most of the disagreement rows and the truth (the rows not labeled) rests on few or none of them (on the
  ninth rule's fresh fullbatch draws breast_cancer had 0 counted pairs at b = 100, pima 21 and spam7 88).
  That group cannot tell whether a label budget orders learners under feature bias at a production batch
  size. A fourth group, **feature_bias_large**, applies the same three mechanisms (``split_biased``, target
  = the 50 % holdout, ``replicate_estimation.MECHANISMS``' settings, with rt_sort's and kmm_threshold's
  column named below instead of column 0) to three whole tables of 4,000–7,000 rows: DAAG spam7 (4,601
  rows; ``crl.tot``), modeldata credit_data (the 4,454 rows with a Status, label Status = bad;
  ``Seniority``) and modeldata wa_churn (7,043 rows, label churn = Yes; ``tenure``), the two modeldata
  tables encoded by ``prepare_tables`` as the natural cases are. The batch is the whole holdout (a random
  ``--full-cap`` = 4,000 rows where larger), the source ≤ ``--n-max`` = 400 random rows of the biased
  source, truth the batch rows not labeled (the fullbatch design); seeds 12 and 13. So that the shipped
  method also gets a fourth independent set of fresh draws, the three other groups run beside it on the
  fullbatch design only, on seeds no report has used: 12, 13, 14 (natural, trcv_pairs) and 8, 9 (feature
  bias). Selectors: ``fewlabel_now`` (what the flow runs: its plan chain, ``fewlabel_select``'s defaults,
  ``decide``), ``uniform`` and ``cv``; the issue's criterion is reported per group. Outputs
  ``label_budget_fresh10.{md,csv,png}``. Added after its run (reported only, it decides nothing):
  ``fewlabel_oneround``, the same posterior over a plan of b rows drawn in **one** round, as the flow's
  ``--label-budget b`` draws them (``fewlabel_now``'s plans are nested rounds 10, 25, 50, …, each weighing
  the pairs by the labels before it, which the flow does not do).
* Detectability, added 2026-11-27 04:35 UTC: a **measurement, not a rule** (nothing is adopted or changed
  by it), written and committed before any result of it was seen (``--detectability``). Why: every rule so
  far misses 0.90 at b = 100 on the TrCV pairs, and the misses look like near-ties; this measures how many
  pairs labels *can* order at each budget, whatever the method. Per (case, seed) of the fresh fullbatch draws
  pooled in ``label_budget_fresh10.md`` (eighth, ninth and tenth seeds; feature_bias_large only in the
  tenth) and per pair (a, b) of learners: the true gap Δ_ab = θ_a − θ_b on the batch (all its rows: the
  issue's truth leaves out the labeled rows, a difference of at most b of N rows), the pair's disagreement
  rows D_ab (|D_ab| = m) and the contrast z_i = c_ia − c_ib on them. An estimate that spends **all** b
  labels on this one pair, drawn uniformly without replacement from D_ab, is the variance-optimal design
  for the pair's Horvitz–Thompson contrast (Sawade et al. 2012, Thm. 1: q ∝ sqrt(E[z²|x]), which is 1 on
  D_ab in a binary task); its design s.d. is (m/N)·S_z/√n·√(1 − n/m) with n = min(b, m) and S_z the s.d.
  of z over D_ab (exact for this design, given the batch's labels). With the shipped difference estimate's
  surrogate (ẑ_i = p̄(ŷ_a|x_i) − p̄(ŷ_b|x_i)) the same design has S_r, the s.d. of z − ẑ, in place of
  S_z. A pair with |Δ| ≥ 0.005 (counted, as in the issue's measure) is then ordered rightly with
  probability about Φ(|Δ|/sd) (normal approximation; 1 where sd = 0, i.e. b ≥ m). The mean over counted
  pairs, pooled per group, is a **per-pair ceiling of labels alone**: no plan can give every pair all b
  labels at once, but the posterior's CV prior can add what the labels lack. Reported per group at
  b = 10 … 200, with the share of counted pairs whose |Δ| < 0.02, beside what the shipped method ordered on
  the same draws (``fewlabel_bayes_dm`` of the eighth, ``fewlabel_now`` of the ninth and tenth: the same
  method). Outputs ``label_budget_detectability.{md,csv}``.
  **Added after that first result** (the per-pair ceiling at b = 100: 0.94 on the TrCV pairs, above what the
  shipped method orders) and after a development run of this very computation on the tenth seeds' natural and
  TrCV cases at b = 50 and 100 (reported only; it decides nothing either): the **design value** of one round
  of b labels shared by all pairs. For a distribution q over the disagreement rows D, the Horvitz–Thompson
  contrast of every pair has the with-replacement variance (1/b)·(Σ_{i∈D} (z_i/N)²/q_i − Δ²); with the true
  variance and no prior, the expected share of counted pairs ordered rightly is the mean of Φ(|Δ|/sd). It is
  computed for the shipped first-round q (all pair weights 1), the uniform distribution over D, and the best
  q of the shipped family (q ∝ sqrt(Σ_ab w_ab·1[ŷ_a ≠ ŷ_b]), mixed with 0.1 uniform) with the pair weights
  w_ab chosen **knowing the truth** (Powell's method from w = 1, on the log scale). The last is an oracle: no
  plan can know the z it samples, so it bounds what re-weighting the pairs could gain. Output
  ``label_budget_detectability_design.csv`` (one row per case × seed × budget). The variance is multiplied
  by the finite-population factor 1 − b/|D| (the plan draws without repeats; exact for the uniform design,
  an approximation for unequal q). The first full run lacked that factor; it gave, at b = 100, 0.900 /
  0.872 / 0.907 / 0.894 (shipped q) and 0.919 / 0.881 / 0.911 / 0.899 (oracle weights) for natural / TrCV
  pairs / feature bias / whole-table feature bias, and is replaced by the run with it.
* Second design, fixed with the fifth rule and before any result of it was seen (reported beside the
  first; it decides nothing): ``--design fullbatch`` follows the issue's definition, "truth is each
  learner's accuracy on the target rows that were not labeled". For natural and trcv_pairs the batch is
  the **whole target group** (a random ``--full-cap`` = 4000 of its rows where it is larger: happiness
  4323, nlswork 6128), the source sample is the same ≤ ``--n-max`` rows per seed as in the first design,
  and truth = each learner's accuracy on the batch rows not labeled (for label-free selectors: the whole
  batch). Feature-bias cases are unchanged (batch ≤ ``--n-max`` holdout rows, truth = the holdout rows
  not labeled). ``trcv_l`` there gets as U a random 400 of the batch rows not labeled (the fits of
  TrCV's reverse models on U would otherwise grow tenfold); the KMM weights are fitted on the whole
  batch. Same selectors, seeds, budgets; outputs ``label_budget_fullbatch.{md,csv,png}``.
"""
