"""`check`: everything about a composed config that can be known before a run starts, in the order it is
checked. Hydra's schema checks (bertlab.training.launch.config_tree) have already run during composition.

Below it, the rules between the keys of the groups: each value may be fine on its own and still not go with
another. Each rule takes the groups and top-level values it reads as its parameters, named after them
(`copy_pairs(data, task)`), and says what is wrong ("…; set …"), or None; `check_combinations` hands each its
groups and refuses the first that finds something. The rules between a taker's own arguments live with it
(`checks_arguments(between=…)`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bertlab.argument_checks import check_between
from bertlab.recipe_files import check_requirements, folder_keys
from bertlab.training.checks import environment
from bertlab.training.checks.environment import check_output_folder, check_resume, check_run_folder
from bertlab.training.checks.keys import ConfigKeys, check_tokenizer_options, overridden_keys, taker_of
from bertlab.training.run.model_group import ARCHITECTURE_KEYS, check_loaded_model, check_model
from bertlab.training.run.run_folder import is_rank_zero

LENGTH_KEYS = ("trainer.max_steps", "trainer.max_epochs")


def check(config: DictConfig, run_dir: str | Path | None, new_run: bool = False) -> None:
    """Everything about `config` that can be known before a run starts; `run_dir` is the run's folder
    (None for a sweep as a whole), `new_run` whether this launch is about to create it."""
    check_combinations(config, [recipe_command])  # before the keys: those of another command's recipe
    environment.check_logger_packages(config.get("logger"))
    overridden = overridden_keys(config.hydra.overrides.task)
    keys = ConfigKeys.walk(config, overridden)
    keys.check_known()
    check_model(config.model, OmegaConf.select(config, "tokenizer.vocab_size", default=None))
    keys.check_values()
    keys.check_taken_together()
    check_combinations(config, [init_from_keeps_architecture])
    requires = dict(config.get("requires") or {})
    check_requirements({key: OmegaConf.select(config, key, default=None) for key in folder_keys(requires)}, requires,
                       str(config.get("name")), overridden)
    environment.check_accelerator(OmegaConf.select(config, "trainer.accelerator", default=None))
    environment.check_search_space(config.hydra)
    environment.check_checkpoints(config.model, config.task, config.data)
    check_loaded_model(config.model, overridden)
    check_combinations(config, RULES)
    check_tokenizer_options(config.get("tokenizer"))
    check_combinations(config, [length_chosen_once])
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
    """ConfigError saying what the first of `rules` (below) finds wrong of `config`, each rule given the groups and
    top-level values its parameters name: `copy_pairs(data, task)` reads config.data and config.task (None for one
    the config lacks)."""
    check_between(config, [functools.partial(given_what_it_reads, rule) for rule in rules])


def given_what_it_reads(rule: Callable[..., str | None], config: DictConfig) -> str | None:
    return rule(**{name: config.get(name) for name in inspect.signature(rule).parameters})


def recipe_command(command: str | None, hydra: DictConfig) -> str | None:
    """A recipe names the command it is for."""
    launched = hydra.job.config_name.replace("_", "-")
    if command is not None and command != launched:
        return f"this recipe is for `python -m bertlab {command}`, not `{launched}`"
    return None


def transfer(data: DictConfig, task: DictConfig) -> str | None:
    """A transfer set's rows have no gold label: only a distillation's teacher can label them."""
    settings = data.get("transfer")
    if not settings or not any(settings.get(key) for key in ("copies", "joined", "unlabelled")):
        return None
    if not str(task.get("_target_", "")).endswith(".DistillationModule"):
        return ("data.transfer: a transfer set has no labels, a teacher labels it; use task=distill "
                          "(or +recipe=sst2_distill), or set data.transfer.copies=0, data.transfer.joined=0 "
                "and data.transfer.unlabelled=null")
    return None


def embedding_student(task: DictConfig, model: DictConfig) -> str | None:
    """A sentence-embedding distillation trains a pretrained student: it has no architecture of its own."""
    if getattr(taker_of(str(task.get("_target_", ""))), "pretrained_student", False) and not model.get("init_from"):
        return ("model.init_from is not set: sentence-embedding distillation trains a pretrained student; point it "
                "at a BertModel folder such as outputs/mlm_tiny_wiki/latest/hf_model "
                "(python -m bertlab train +recipe=mlm_tiny_wiki)")
    return None


def classifier_tokenizer(command: str | None, data: DictConfig) -> str | None:
    """A classifier from scratch reads its vocabulary from `data.tokenizer` (a checkpoint's folder is checked by
    bertlab.recipe_files)."""
    if command == "fine-tune" and not data.get("tokenizer"):
        return ("data.tokenizer is not set: name a tokenizer (vocab.txt, tokenizer.json or a checkpoint folder), or "
                "start from a checkpoint with model.init_from=…")
    return None


def copy_pairs(data: DictConfig, task: DictConfig) -> str | None:
    copy_pair_prob = data.get("copy_pair_prob")
    if copy_pair_prob and task.get("nsp", False):
        return (f"data.copy_pair_prob={copy_pair_prob} with next-sentence prediction: a copied segment is neither "
                f"the next text nor a random one; set data.copy_pair_prob=0 or task.nsp=false")
    return None


def compile_mode(task: DictConfig) -> str | None:
    mode = task.get("compile_mode")
    if mode is not None and not task.get("compile", False):
        return f"task.compile_mode={mode} needs task.compile=true"
    return None


# A task that reads its own kind of data, and the data: (module, data module, task option, what it does, data to give).
PAIRED_TASKS = ((".TokenClassificationModule", ".TokenClassificationDataModule", "token_classification",
                 "tags words", "holds a tag per word", "a token dataset such as data=conll2003"),
                (".QuestionAnsweringModule", ".QuestionAnsweringDataModule", "question_answering",
                 "answers questions with spans", "holds questions with answer spans",
                 "a SQuAD dataset such as data=squad"))


def token_task(command: str | None, task: DictConfig, data: DictConfig) -> str | None:
    """A token classifier reads tagged words, a span head questions with answers, a sentence classifier labelled
    texts: task and data go in pairs."""
    task_class, data_class = str(task.get("_target_", "")), str(data.get("_target_", ""))
    for module, data_module, option, does, holds, example in PAIRED_TASKS:
        if data_class.endswith(data_module) and not task_class.endswith(module) and command == "fine-tune":
            return (f"data={data_class.rsplit('.', 1)[-1]} {holds}: fine-tune it with task={option} "
                    f"(task._target_ is {task.get('_target_')})")
        if task_class.endswith(module) and not data_class.endswith(data_module):
            return f"task={option} {does}: give it {example} (data._target_ is {data_class})"
    return None


def init_from_keeps_architecture(model: DictConfig, hydra: DictConfig) -> str | None:
    """A model loaded with `init_from` keeps the architecture and vocabulary of its checkpoint: the command line
    (`hydra.overrides.task`) cannot change them."""
    if not model.get("init_from"):
        return None
    conflicts = [key for key in overridden_keys(hydra.overrides.task)
                 if key == "model" or key == "tokenizer.vocab_size"
                 or (key.startswith("model.") and key.removeprefix("model.") in ARCHITECTURE_KEYS)]
    if conflicts:
        return (f"{conflicts[0]} cannot change a model loaded with model.init_from={model.init_from}: its "
                f"architecture and vocabulary come from that checkpoint's config.json; drop {conflicts[0]}, or set "
                f"model.init_from=null to train from scratch")
    return None


def length_chosen_once(budget_minutes: float | None, trainer: DictConfig, hydra: DictConfig) -> str | None:
    """A time budget chooses the length of training: the command line (`hydra.overrides.task`) cannot choose it
    too."""
    if budget_minutes is None:
        return None
    if key := next((key for key in overridden_keys(hydra.overrides.task) if key in LENGTH_KEYS), None):
        return (f"{key}={trainer.get(key.removeprefix('trainer.'))} and budget_minutes={budget_minutes}: "
                f"the budget chooses trainer.max_steps itself; drop one of the two")
    return None


RULES = (transfer, embedding_student, classifier_tokenizer, copy_pairs, compile_mode, token_task)
