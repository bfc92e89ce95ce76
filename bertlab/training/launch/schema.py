"""Structured schemas that Hydra checks while it composes the config: a value of the wrong type
(`model.hidden_size=abc`, `seed=x`) or an unknown `model.*` key is refused before anything runs.
Their fields declare the range of a value as the arguments of a `_target_` do (bertlab.value_rules).

The model group's schema is `BertConfig`'s own fields (minus those the tokenizer and the data decide)
plus `init_from` and `allow_reinitialised` (bertlab.checkpoint.fitting); the conf/model/*.yaml files start from
it (`defaults: [/schema/model@_here_]`). The tokenizer group's is `path`, `vocab_size` and `WordPieceOptions`' fields.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Dict, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from bertlab.argument_checks import Positive, Seed
from bertlab.config import VOCAB_SIZE_LIMIT, BertConfig
from bertlab.tokenizer import WordPieceOptions
from bertlab.value_rules import Interval, OneOf

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


def register(store: ConfigStore) -> None:
    store.store(group="schema", name="model", node=ModelSchema)
    store.store(group="schema", name="tokenizer", node=TokenizerSchema)
    store.store(group="schema", name="train", node=TrainSchema)
    store.store(group="schema", name="fine_tune", node=FineTuneSchema)
