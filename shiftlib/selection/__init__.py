"""Model selection without target labels: ReverseTesting (RT §4), TrCV (TrCV Fig. 1/3, eq. 14–16),
the CV baselines of RT §3 / TrCV §5.1, and agreement measures against a ground truth; and few-label
selection (``plan_labels`` / ``fewlabel_select``: active model comparison with a label budget).

Every selector returns a typed result with ``scores``, ``ranks``, ``ranking`` (best first, ties
kept), ``winner(a, b)``, ``to_frame()`` (learner, selector, score, rank, interval_low,
interval_high) and ``to_dict()``; ReverseTesting adds the matrix M[labeler, retrainer]
(``matrix``, ``matrix_frame()``).
"""

from .agreement import (
    Agreement,
    PairwiseAgreement,
    agreement,
    corr_measure,
    kendall_tau,
    pairwise_order_accuracy,
    regret,
)
from .baselines import (
    cv_score,
    leave_one_out,
    repeated_cv,
    source_cv,
    source_target_validation,
    target_cv,
    weighted_cv,
)
from .candidates import Candidate, resolve_candidates
from .fewlabel import (
    LabelPlan,
    TargetPredictions,
    decide,
    fewlabel_select,
    guarded_select,
    inclusion_probabilities,
    plan_labels,
    systematic_sample,
    target_predictions,
    trcv_labeled_select,
)
from .importance import importance_weights
from .plotting import plot_rt_matrix
from .results import SCORE_COLUMNS, SelectorScores, concat_scores
from .reverse_testing import (
    ReverseCell,
    ReverseTestingResult,
    TargetLabels,
    combine,
    label_target,
    pair_decision,
    reverse_score,
    reverse_testing,
    reverse_testing_row,
)
from .scoring import BenefitScorer, accuracy_scorer, get_scorer, roc_auc_scorer
from .selectors import (
    BaseSelector,
    ReverseTestingSelector,
    SourceCVSelector,
    TrCVSelector,
    WeightedCVSelector,
)
from .trcv import (
    TrCVResult,
    TrCVSetup,
    accuracy_distribution,
    accuracy_interval,
    probability_better,
    reverse_validation_fold,
    trcv,
    trcv_assemble,
    trcv_fold,
    trcv_fold_all,
    trcv_from_folds,
    trcv_scores,
    trcv_select,
    trcv_setup,
)

__all__ = [
    "SCORE_COLUMNS",
    "SELECTORS",
    "Agreement",
    "BaseSelector",
    "BenefitScorer",
    "Candidate",
    "LabelPlan",
    "PairwiseAgreement",
    "ReverseCell",
    "ReverseTestingResult",
    "ReverseTestingSelector",
    "SourceCVSelector",
    "TrCVSelector",
    "WeightedCVSelector",
    "SelectorScores",
    "concat_scores",
    "TargetLabels",
    "TargetPredictions",
    "TrCVResult",
    "TrCVSetup",
    "accuracy_distribution",
    "accuracy_interval",
    "accuracy_scorer",
    "agreement",
    "bind_selector",
    "combine",
    "corr_measure",
    "cv_score",
    "decide",
    "fewlabel_select",
    "guarded_select",
    "get_scorer",
    "importance_weights",
    "inclusion_probabilities",
    "kendall_tau",
    "label_target",
    "make_selector",
    "leave_one_out",
    "pair_decision",
    "pairwise_order_accuracy",
    "plan_labels",
    "plot_rt_matrix",
    "probability_better",
    "regret",
    "repeated_cv",
    "resolve_candidates",
    "reverse_score",
    "reverse_testing",
    "reverse_testing_row",
    "reverse_validation_fold",
    "roc_auc_scorer",
    "runs_on_every_row",
    "selector_fan_out",
    "selector_settings",
    "source_cv",
    "source_target_validation",
    "systematic_sample",
    "target_cv",
    "target_predictions",
    "trcv",
    "trcv_assemble",
    "trcv_fold",
    "trcv_fold_all",
    "trcv_from_folds",
    "trcv_labeled_select",
    "trcv_scores",
    "trcv_select",
    "trcv_setup",
    "weighted_cv",
]

# last: the registry imports each selector's module by its catalog path (shiftlib.catalog.SELECTION_METHODS), and
# a selector's module may import its base class from this package, which by now defines it
from .registry import (  # noqa: E402
    SELECTORS,
    bind_selector,
    make_selector,
    runs_on_every_row,
    selector_fan_out,
    selector_settings,
)
