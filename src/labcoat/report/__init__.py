"""Reports: the analysis behind them and their terminal rendering."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.report._analysis import (
        Analysis,
        ArmResult,
        Comparison,
        HypothesisResult,
        analyze,
        verdict_word,
    )
    from labcoat.report._curves import arm_curves, trial_curves
    from labcoat.report._diagnosis import diagnosis_entry, print_diagnoses, print_templates
    from labcoat.report._evals import stored_item_scores
    from labcoat.report._figures import overlay_plot, trial_curve_plot
    from labcoat.report._files import file_comparison_dict, print_file_comparison
    from labcoat.report._html import CSS, figure_html, plotly_js, render_html, write_html_report
    from labcoat.report._logs import LogLine, lines_json, print_lines, select_lines
    from labcoat.report._lttb import downsample, lttb
    from labcoat.report._page import (
        ReportPage,
        page_curves,
        report_page,
        review_findings,
        trial_data,
    )
    from labcoat.report._reproduce import print_provenance, print_replay, print_rerun
    from labcoat.report._review import plan_dict, print_findings, print_plan
    from labcoat.report._scales import fit_summary, print_backtest, print_fit, run_backtest
    from labcoat.report._status import (
        experiment_summary,
        goodput_line,
        print_status,
        status_data,
    )
    from labcoat.report._terminal import analysis_dict, print_report

# Names load on first use: `labcoat status`, `show` and `logs` do not import scipy (1 s),
# which only the analysis needs.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_analysis": ("Analysis", "ArmResult", "Comparison", "HypothesisResult", "analyze",
                  "verdict_word"),
    "_diagnosis": ("diagnosis_entry", "print_diagnoses", "print_templates"),
    "_evals": ("stored_item_scores",),
    "_curves": ("arm_curves", "trial_curves"),
    "_files": ("file_comparison_dict", "print_file_comparison"),
    "_figures": ("overlay_plot", "trial_curve_plot"),
    "_html": ("CSS", "figure_html", "plotly_js", "render_html", "write_html_report"),
    "_scales": ("fit_summary", "print_backtest", "print_fit", "run_backtest"),
    "_lttb": ("downsample", "lttb"),
    "_logs": ("LogLine", "lines_json", "print_lines", "select_lines"),
    "_reproduce": ("print_provenance", "print_replay", "print_rerun"),
    "_page": ("ReportPage", "page_curves", "report_page", "review_findings", "trial_data"),
    "_review": ("plan_dict", "print_findings", "print_plan"),
    "_status": ("experiment_summary", "goodput_line", "print_status", "status_data"),
    "_terminal": ("analysis_dict", "print_report"),
})
