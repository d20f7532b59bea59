"""Statistics on numbers from anywhere: numpy and scipy only, no torch, no database.

- one eval, one model (items): eval_mean, resampled_mean, bernoulli_se; an item answered n
  times: pass_at_k (Chen et al. 2021's unbiased estimator), pass_hat_k (all k correct)
- two models on the same items: paired_difference; different items: unpaired_difference
- runs x tasks (rliable's aggregates, far faster): interval_estimates (IQM, mean, median,
  optimality gap; stratified bootstrap), probability_of_improvement, performance_profile
- runs (seeds): mean_interval, welch, paired_t, permutation_test, mann_whitney, hedges_g,
  compare_curves (one number per run, never steps as samples); trimmed_mean_interval, yuen
  (20% trimmed means, resist one diverged run)
- planning: items_needed, minimum_detectable_effect, seeds_needed, power_two_sample,
  power_paired (paired seeds), power_factorial (an effect of a two-level factorial),
  family_alpha (per-comparison alpha under a correction)
- sequential (seeds in rounds, anytime-valid): SequentialTest, confidence_sequence,
  sequential_plan, sequential_power
- families: adjust (Holm, Benjamini-Hochberg, Bonferroni), holm, benjamini_hochberg
- factorial designs: full_factorial, fractional_factorial (aliasing), factorial_effects,
  suggest_fractional
- across tasks: random_effects, fixed_effect, generalization, macro_average
- curves against reference runs: prediction_band (per-step band for a new run, over looks)
- one set of items under k conditions (prompt templates): spread_of_means (range, paired)
- seeds x items: ratio_of_means (two-way bootstrap, Owen 2007; e.g. the share of a
  difference that patching one component restores, labcoat.inside)
- the verdict on a hypothesis (supported, negligible, refuted, no-effect, aliased,
  inconclusive; equivalence by TOST): verdict, equivalence_p, Verdict, DECISIONS
- forecasts of outcomes (`labcoat ledger`): brier_score, brier_score_multi,
  murphy_decomposition, log_score, crps_normal, crps_interval, reliability_bins,
  calibration_by_level, spiegelhalter_z, wilson_interval; expected_information (what a
  test teaches about a claim, in bits)
- ratings of many models from battles or per-item scores: battles, battles_from_scores,
  bradley_terry (Davidson ties, bootstrap and rank intervals), elo (spread over orders),
  nash_average / nash_rating (redundancy-invariant), redundancy_audit
- step times (labcoat.torch.time_phases): slow_steps (which phase of which rank got slower,
  from when; a Bernoulli CUSUM on exceedances), detect_shift, bernoulli_cusum,
  SlowStepRule, SlowStep
- item response theory (2PL, marginal maximum likelihood) and adaptive items: fit_2pl,
  IRTFit, informative_items, ability, Ability, select_items, adaptive_test, AdaptiveTest
- warnings that qualify a result: StatsWarning
"""

from labcoat.stats._aggregates import (
    aggregate_iqm,
    aggregate_mean,
    aggregate_median,
    aggregate_optimality_gap,
    aggregate_probability_of_improvement,
)
from labcoat.stats._bands import Band, prediction_band
from labcoat.stats._bootstrap import interval_estimates, probability_of_improvement
from labcoat.stats._change import (
    Shift,
    SlowStep,
    SlowStepRule,
    bernoulli_cusum,
    busy_rise,
    detect_shift,
    slow_steps,
)
from labcoat.stats._checks import StatsWarning
from labcoat.stats._curves import compare_curves, summarize_curves
from labcoat.stats._factorial import (
    FactorialDesign,
    defining_words,
    fractional_factorial,
    full_factorial,
    full_factorial_levels,
)
from labcoat.stats._factorial_effects import factorial_effects
from labcoat.stats._factorial_plan import Suggestion as FactorialSuggestion
from labcoat.stats._factorial_plan import suggest_fractional
from labcoat.stats._forecasts import (
    CALIBRATION_ALPHA,
    CalibrationTest,
    LevelCalibration,
    Murphy,
    ReliabilityBin,
    brier_score,
    brier_score_multi,
    calibration_by_level,
    crps_interval,
    crps_normal,
    expected_information,
    interval_normal,
    log_score,
    murphy_decomposition,
    reliability_bins,
    spiegelhalter_z,
    wilson_interval,
)
from labcoat.stats._generalize import Generalization, generalization
from labcoat.stats._irt import (
    Ability,
    AdaptiveTest,
    IRTFit,
    ability,
    adaptive_test,
    fit_2pl,
    informative_items,
    select_items,
)
from labcoat.stats._items import (
    ResampledMean,
    bernoulli_se,
    eval_mean,
    paired_difference,
    resampled_mean,
    unpaired_difference,
)
from labcoat.stats._meta import MetaAnalysis, fixed_effect, random_effects
from labcoat.stats._multiple import (
    CORRECTIONS,
    Adjusted,
    Correction,
    adjust,
    benjamini_hochberg,
    bonferroni,
    holm,
    macro_average,
)
from labcoat.stats._nash import NashAverage, nash_average
from labcoat.stats._passk import pass_at_k, pass_at_k_items, pass_hat_k, pass_hat_k_items
from labcoat.stats._power import (
    PilotVariances,
    family_alpha,
    items_needed,
    items_needed_from_pilot,
    minimum_detectable_effect,
    pilot_variances,
    power_factorial,
    power_paired,
    power_two_sample,
    seeds_needed,
    seeds_needed_from_pilot,
)
from labcoat.stats._profiles import Profile, performance_profile
from labcoat.stats._ratings import (
    Battles,
    Elo,
    Ratings,
    battles,
    battles_from_scores,
    bradley_terry,
    elo,
)
from labcoat.stats._redundancy import (
    Audit,
    AuditRow,
    cluster_game,
    nash_rating,
    redundancy_audit,
)
from labcoat.stats._robust import trimmed_mean_interval, yuen
from labcoat.stats._seeds import mean_interval, paired_t, welch
from labcoat.stats._sequential import (
    ConfidenceSequence,
    SequentialPlan,
    SequentialPower,
    SequentialResult,
    SequentialTest,
    confidence_sequence,
    sequential_plan,
    sequential_power,
)
from labcoat.stats._spread import Spread, spread_of_means
from labcoat.stats._tests import (
    MannWhitneyResult,
    PermutationResult,
    check_same_items,
    hedges_g,
    mann_whitney,
    permutation_test,
)
from labcoat.stats._two_way import ratio_of_means
from labcoat.stats._types import Difference, Interval
from labcoat.stats._verdict import DECISIONS, Verdict, equivalence_p, verdict

__all__ = [
    "Ability",
    "AdaptiveTest",
    "IRTFit",
    "ability",
    "adaptive_test",
    "fit_2pl",
    "informative_items",
    "select_items",
    "Shift",
    "SlowStep",
    "SlowStepRule",
    "bernoulli_cusum",
    "busy_rise",
    "detect_shift",
    "slow_steps",
    "Audit",
    "AuditRow",
    "Battles",
    "Elo",
    "NashAverage",
    "Ratings",
    "battles",
    "battles_from_scores",
    "bradley_terry",
    "cluster_game",
    "elo",
    "nash_average",
    "pass_at_k",
    "pass_at_k_items",
    "pass_hat_k",
    "pass_hat_k_items",
    "nash_rating",
    "redundancy_audit",
    "CALIBRATION_ALPHA",
    "CalibrationTest",
    "LevelCalibration",
    "Murphy",
    "ReliabilityBin",
    "brier_score",
    "brier_score_multi",
    "calibration_by_level",
    "crps_interval",
    "crps_normal",
    "expected_information",
    "interval_normal",
    "log_score",
    "murphy_decomposition",
    "reliability_bins",
    "spiegelhalter_z",
    "wilson_interval",
    "CORRECTIONS",
    "DECISIONS",
    "Adjusted",
    "Correction",
    "Band",
    "ConfidenceSequence",
    "Difference",
    "FactorialDesign",
    "FactorialSuggestion",
    "Generalization",
    "Interval",
    "MannWhitneyResult",
    "MetaAnalysis",
    "PermutationResult",
    "PilotVariances",
    "Profile",
    "ResampledMean",
    "SequentialPlan",
    "SequentialPower",
    "SequentialResult",
    "SequentialTest",
    "Spread",
    "StatsWarning",
    "Verdict",
    "adjust",
    "aggregate_iqm",
    "aggregate_mean",
    "aggregate_median",
    "aggregate_optimality_gap",
    "aggregate_probability_of_improvement",
    "benjamini_hochberg",
    "bernoulli_se",
    "bonferroni",
    "check_same_items",
    "compare_curves",
    "confidence_sequence",
    "defining_words",
    "equivalence_p",
    "eval_mean",
    "factorial_effects",
    "family_alpha",
    "fixed_effect",
    "fractional_factorial",
    "full_factorial",
    "full_factorial_levels",
    "generalization",
    "hedges_g",
    "holm",
    "interval_estimates",
    "items_needed",
    "items_needed_from_pilot",
    "macro_average",
    "mann_whitney",
    "mean_interval",
    "minimum_detectable_effect",
    "paired_difference",
    "paired_t",
    "performance_profile",
    "permutation_test",
    "pilot_variances",
    "power_factorial",
    "power_paired",
    "power_two_sample",
    "prediction_band",
    "probability_of_improvement",
    "random_effects",
    "resampled_mean",
    "seeds_needed",
    "seeds_needed_from_pilot",
    "sequential_plan",
    "sequential_power",
    "spread_of_means",
    "ratio_of_means",
    "suggest_fractional",
    "summarize_curves",
    "trimmed_mean_interval",
    "unpaired_difference",
    "verdict",
    "welch",
    "yuen",
]
