"""Reports: the analysis behind them and their terminal rendering."""

from labcoat.report._analysis import Analysis, ArmResult, Comparison, analyze
from labcoat.report._files import file_comparison_dict, print_file_comparison
from labcoat.report._terminal import analysis_dict, print_report

__all__ = [
    "Analysis",
    "ArmResult",
    "Comparison",
    "analysis_dict",
    "analyze",
    "file_comparison_dict",
    "print_file_comparison",
    "print_report",
]
