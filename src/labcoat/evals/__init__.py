"""Evaluations: per-item results from files (labcoat, CSV/JSON, lm-eval-harness) and their
comparison; contamination of eval items by training text; eval suites as data (items +
scorer, from JSONL/CSV or lm-eval-harness task YAML) and the engine that scores them with a
PyTorch model during training; small subsets that keep the full suite's ranking;
prompt-format sensitivity; regression suites harvested from failures, and their verdicts
over time.

Names are imported on first use (PEP 562), so that the CLI can register
`labcoat contamination` without importing scipy when it starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.evals._compare import FileComparison, TaskComparison, compare_item_scores
    from labcoat.evals._contamination import (
        ContaminationReport,
        ItemContamination,
        Match,
        ScoreComparison,
        TaskContamination,
        scan_contamination,
    )
    from labcoat.evals._dedup import DuplicateGroups, find_duplicates
    from labcoat.evals._engine import EvalEngine, EvalResult
    from labcoat.evals._eval_items import EvalItem, load_eval_items
    from labcoat.evals._fresh import (
        Difficulty,
        Template,
        TemplateError,
        TemplateSuite,
        fresh_items,
        instantiate,
        load_templates,
        original_item,
        twins,
        write_items,
    )
    from labcoat.evals._gap import ContaminationGap, TaskGap, contamination_gap, gap_from_scores
    from labcoat.evals._harvest import HarvestConfig, HarvestReport, Outcome, harvest
    from labcoat.evals._harvest_sources import (
        log_outcomes,
        recorded_inputs,
        select_trials,
        store_outcomes,
    )
    from labcoat.evals._importers import ItemScores, load_item_scores, merge_item_scores
    from labcoat.evals._in_training import InTrainingEval, load_subset_file
    from labcoat.evals._lm_eval_task import load_lm_eval_task
    from labcoat.evals._naive import naive_scores
    from labcoat.evals._ngrams import normalize_text
    from labcoat.evals._prompts import (
        TEMPLATES,
        TemplateScores,
        evaluate_templates,
        prompt_templates,
        render,
    )
    from labcoat.evals._regression import record_entry, score_entry
    from labcoat.evals._regression_suite import (
        RegressionSuite,
        list_suites,
        load_regression_suite,
        save_regression_suite,
        suite_path,
        suites_dir,
    )
    from labcoat.evals._scorers import Scorer, parse_scorer, score_text
    from labcoat.evals._sensitivity import (
        ArmSensitivity,
        Sensitivity,
        TemplateComparison,
        format_sensitivity,
    )
    from labcoat.evals._subset import ResultMatrix, SubsetChoice, choose_subset, result_matrix
    from labcoat.evals._suite import EvalSuite, load_suite
    from labcoat.evals._tokenizer import Tokenizer, as_tokenizer
    from labcoat.evals._training_text import training_files

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_compare": ("FileComparison", "TaskComparison", "compare_item_scores"),
    "_contamination": ("ContaminationReport", "ItemContamination", "Match", "ScoreComparison",
                       "TaskContamination", "scan_contamination"),
    "_engine": ("EvalEngine", "EvalResult"),
    "_eval_items": ("EvalItem", "load_eval_items"),
    "_fresh": ("Difficulty", "Template", "TemplateError", "TemplateSuite", "fresh_items",
               "instantiate", "load_templates", "original_item", "twins", "write_items"),
    "_gap": ("ContaminationGap", "TaskGap", "contamination_gap", "gap_from_scores"),
    "_dedup": ("DuplicateGroups", "find_duplicates"),
    "_harvest": ("HarvestConfig", "HarvestReport", "Outcome", "harvest"),
    "_harvest_sources": ("log_outcomes", "recorded_inputs", "select_trials", "store_outcomes"),
    "_regression": ("record_entry", "score_entry"),
    "_regression_suite": ("RegressionSuite", "list_suites", "load_regression_suite",
                          "save_regression_suite", "suite_path", "suites_dir"),
    "_in_training": ("InTrainingEval", "load_subset_file"),
    "_lm_eval_task": ("load_lm_eval_task",),
    "_naive": ("naive_scores",),
    "_scorers": ("Scorer", "parse_scorer", "score_text"),
    "_subset": ("ResultMatrix", "SubsetChoice", "choose_subset", "result_matrix"),
    "_suite": ("EvalSuite", "load_suite"),
    "_tokenizer": ("Tokenizer", "as_tokenizer"),
    "_training_text": ("training_files",),
    "_importers": ("ItemScores", "load_item_scores", "merge_item_scores"),
    "_ngrams": ("normalize_text",),
    "_prompts": ("TEMPLATES", "TemplateScores", "evaluate_templates", "prompt_templates",
                 "render"),
    "_sensitivity": ("ArmSensitivity", "Sensitivity", "TemplateComparison",
                     "format_sensitivity"),
})
