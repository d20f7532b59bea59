"""Reports: the terminal and HTML rendering of what `labcoat.analysis` finds.

The analysis names (`analyze`, `status_data`, `report_page`...) are re-exported
here, where earlier versions defined them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.analysis import (
        Analysis,
        ArmResult,
        Comparison,
        HypothesisResult,
        ReportPage,
        analyze,
        arm_curves,
        downsample,
        experiment_summary,
        file_comparison_dict,
        fit_summary,
        lttb,
        page_curves,
        report_page,
        review_findings,
        run_backtest,
        status_data,
        stored_item_scores,
        trial_curves,
        trial_data,
        verdict_word,
    )
    from labcoat.report._diagnosis import diagnosis_entry, print_diagnoses, print_templates
    from labcoat.report._figures import overlay_plot, trial_curve_plot
    from labcoat.report._files import print_file_comparison
    from labcoat.report._html import CSS, figure_html, plotly_js, render_html, write_html_report
    from labcoat.report._ledger import ledger_body, ledger_html, print_ledger
    from labcoat.report._logs import LogLine, lines_json, print_lines, select_lines
    from labcoat.report._phases import phase_plot, print_phases
    from labcoat.report._reproduce import print_provenance, print_replay, print_rerun
    from labcoat.report._review import (
        plan_dict,
        print_findings,
        print_plan,
        print_ranking,
        ranking_dict,
    )
    from labcoat.report._scales import print_backtest, print_fit
    from labcoat.report._status import (
        goodput_line,
        mark_interrupted,
        print_status,
        print_wide,
        summary_interrupted,
    )
    from labcoat.report._terminal import analysis_dict, print_report

# Names load on first use: `labcoat status`, `show` and `logs` do not import scipy (1 s),
# which only the analysis needs.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "labcoat.analysis": ("Analysis", "ArmResult", "Comparison", "HypothesisResult", "ReportPage",
                         "analyze", "arm_curves", "downsample", "experiment_summary",
                         "file_comparison_dict", "fit_summary", "lttb", "page_curves",
                         "report_page", "review_findings", "run_backtest", "status_data",
                         "stored_item_scores", "trial_curves", "trial_data", "verdict_word"),
    "_diagnosis": ("diagnosis_entry", "print_diagnoses", "print_templates"),
    "_figures": ("overlay_plot", "trial_curve_plot"),
    "_files": ("print_file_comparison",),
    "_html": ("CSS", "figure_html", "plotly_js", "render_html", "write_html_report"),
    "_ledger": ("ledger_body", "ledger_html", "print_ledger"),
    "_logs": ("LogLine", "lines_json", "print_lines", "select_lines"),
    "_phases": ("phase_plot", "print_phases"),
    "_reproduce": ("print_provenance", "print_replay", "print_rerun"),
    "_review": ("plan_dict", "print_findings", "print_plan", "print_ranking", "ranking_dict"),
    "_scales": ("print_backtest", "print_fit"),
    "_status": ("goodput_line", "mark_interrupted", "print_status", "print_wide",
                "summary_interrupted"),
    "_terminal": ("analysis_dict", "print_report"),
})
