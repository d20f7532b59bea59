"""What an experiment in the store says: the verdict and its numbers, curves, status,
eval and scaling sections, as plain data. Display (terminal, HTML) lives in
`labcoat.report`, the dashboard in `labcoat.web`; both read this."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.analysis._curves import arm_curves, trial_curves
    from labcoat.analysis._evals import (
        arm_item_scores,
        evaluations_data,
        file_comparison_dict,
        prompts_data,
        stored_item_scores,
    )
    from labcoat.analysis._experiment import (
        AGGREGATES,
        MACRO,
        SEED_CAVEAT,
        Analysis,
        ArmResult,
        Comparison,
        HypothesisResult,
        analyze,
        verdict_word,
    )
    from labcoat.analysis._json import json_safe
    from labcoat.analysis._ledger import Entry, Ledger, Score, entries_of, ledger, ledger_dict
    from labcoat.analysis._lttb import downsample, lttb
    from labcoat.analysis._page import (
        ReportPage,
        page_curves,
        report_page,
        review_findings,
        trial_data,
    )
    from labcoat.analysis._phases import step_phases
    from labcoat.analysis._scales import backtest_summary, fit_summary, run_backtest, scales_data
    from labcoat.analysis._status import experiment_summary, status_data
    from labcoat.analysis._textplot import loglog_plot
    from labcoat.analysis._why import ComponentRow, Why, load_why, save_why, why_path

# Names load on first use: `labcoat status` does not import scipy (1 s), which only the
# verdict needs.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_curves": ("arm_curves", "trial_curves"),
    "_evals": ("arm_item_scores", "evaluations_data", "file_comparison_dict", "prompts_data",
               "stored_item_scores"),
    "_experiment": ("AGGREGATES", "MACRO", "SEED_CAVEAT", "Analysis", "ArmResult", "Comparison",
                    "HypothesisResult", "analyze", "verdict_word"),
    "_json": ("json_safe",),
    "_ledger": ("Entry", "Ledger", "Score", "entries_of", "ledger", "ledger_dict"),
    "_lttb": ("downsample", "lttb"),
    "_phases": ("step_phases",),
    "_page": ("ReportPage", "page_curves", "report_page", "review_findings", "trial_data"),
    "_scales": ("backtest_summary", "fit_summary", "run_backtest", "scales_data"),
    "_status": ("experiment_summary", "status_data"),
    "_textplot": ("loglog_plot",),
    "_why": ("ComponentRow", "Why", "load_why", "save_why", "why_path"),
})
