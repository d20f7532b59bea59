"""Reports: the analysis behind them and their terminal rendering."""

from labcoat.report._analysis import Analysis, ArmResult, Comparison, HypothesisResult, analyze
from labcoat.report._diagnosis import diagnosis_entry, print_diagnoses, print_templates
from labcoat.report._files import file_comparison_dict, print_file_comparison
from labcoat.report._logs import LogLine, lines_json, print_lines, select_lines
from labcoat.report._review import plan_dict, print_findings, print_plan
from labcoat.report._status import experiment_summary, goodput_line, print_status, status_data
from labcoat.report._terminal import analysis_dict, print_report

__all__ = [
    "Analysis",
    "ArmResult",
    "Comparison",
    "HypothesisResult",
    "LogLine",
    "analysis_dict",
    "analyze",
    "diagnosis_entry",
    "experiment_summary",
    "file_comparison_dict",
    "goodput_line",
    "lines_json",
    "plan_dict",
    "print_diagnoses",
    "print_file_comparison",
    "print_findings",
    "print_lines",
    "print_plan",
    "print_report",
    "print_status",
    "print_templates",
    "select_lines",
    "status_data",
]
