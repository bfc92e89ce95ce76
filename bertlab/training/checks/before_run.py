"""`check`: everything about a composed config that can be known before a run starts, in the order it is
checked. Hydra's schema checks (bertlab.training.launch.schema) have already run during composition."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bertlab.argument_checks import check_between
from bertlab.recipe_files import check_requirements, folder_keys
from bertlab.training.checks import combinations, environment
from bertlab.training.checks.keys import ConfigKeys, check_tokenizer_options, overridden_keys
from bertlab.training.checks.run_folder_checks import check_output_folder, check_resume, check_run_folder
from bertlab.training.run.model_group import check_loaded_model, check_model
from bertlab.training.run.run_folder import is_rank_zero


def check(config: DictConfig, run_dir: str | Path | None, new_run: bool = False) -> None:
    """Everything about `config` that can be known before a run starts; `run_dir` is the run's folder
    (None for a sweep as a whole), `new_run` whether this launch is about to create it."""
    check_combinations(config, [combinations.recipe_command])  # before the keys: those of another command's recipe
    environment.check_logger_packages(config.get("logger"))
    overridden = overridden_keys(config.hydra.overrides.task)
    keys = ConfigKeys.walk(config, overridden)
    keys.check_known()
    check_model(config.model, OmegaConf.select(config, "tokenizer.vocab_size", default=None))
    keys.check_values()
    keys.check_taken_together()
    check_combinations(config, [combinations.init_from_keeps_architecture])
    requires = dict(config.get("requires") or {})
    check_requirements({key: OmegaConf.select(config, key, default=None) for key in folder_keys(requires)}, requires,
                       str(config.get("name")), overridden)
    environment.check_accelerator(OmegaConf.select(config, "trainer.accelerator", default=None))
    environment.check_search_space(config.hydra)
    environment.check_checkpoints(config.model, config.task, config.data)
    check_loaded_model(config.model, overridden)
    check_combinations(config, combinations.RULES)
    check_tokenizer_options(config.get("tokenizer"))
    check_combinations(config, [combinations.length_chosen_once])
    if run_dir is None:
        return
    if new_run:
        check_output_folder(run_dir)
        if is_rank_zero():  # the other ranks of a run write into the folder rank 0 made
            check_run_folder(Path(run_dir), config.resume)
    check_resume(config.resume, Path(run_dir), budget_minutes=config.budget_minutes,
                 trainer_precision=OmegaConf.select(config, "trainer.precision"), model=config.model, task=config.task,
                 data=config.data)


def check_combinations(config: DictConfig, rules: Sequence[Callable[..., str | None]]) -> None:
    """ConfigError saying what the first of `rules` (bertlab.training.checks.combinations) finds wrong of `config`,
    each rule given the groups and top-level values its parameters name: `copy_pairs(data, task)` reads config.data
    and config.task (None for one the config lacks)."""
    check_between(config, [functools.partial(given_what_it_reads, rule) for rule in rules])


def given_what_it_reads(rule: Callable[..., str | None], config: DictConfig) -> str | None:
    return rule(**{name: config.get(name) for name in inspect.signature(rule).parameters})
