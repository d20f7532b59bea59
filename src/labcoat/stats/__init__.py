"""Statistics on numbers from anywhere: numpy and scipy only, no torch, no database."""

from labcoat.stats._checks import StatsWarning
from labcoat.stats._items import paired_difference
from labcoat.stats._multiple import holm, macro_average
from labcoat.stats._seeds import mean_interval, welch
from labcoat.stats._types import Difference, Interval

__all__ = [
    "Difference",
    "Interval",
    "StatsWarning",
    "holm",
    "macro_average",
    "mean_interval",
    "paired_difference",
    "welch",
]
