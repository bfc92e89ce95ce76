"""The named model sizes (bert_tiny, bert_mini, …, modernbert_base) as plain dicts, read from the package's
conf/model/<name>.yaml without composing Hydra, for code that builds models outside a run (the benchmark).

A file names the file it starts from in its Hydra defaults list (`defaults: [bert_base, _self_]`), and its
own values come last; bert_base starts from the model group's schema, whose defaults are BertConfig's, so
the fields no file sets are left to BertConfig.from_dict. No model file holds an interpolation.
"""

from __future__ import annotations

import importlib.resources
from typing import Annotated

from omegaconf import OmegaConf

from bertlab.argument_checks import checks_arguments
from bertlab.value_rules import OneOf

CHECKPOINT_KEYS = ("init_from", "allow_reinitialised")  # the model group's keys that are not BertConfig's


def model_folder():
    """conf/model, as the package ships it."""
    return importlib.resources.files("bertlab.conf").joinpath("model")


def preset_names() -> list[str]:
    return sorted(entry.name[:-5] for entry in model_folder().iterdir() if entry.name.endswith(".yaml"))


@checks_arguments
def model_preset(name: Annotated[str, OneOf(*preset_names())]) -> dict:
    """The BertConfig fields that conf/model/`name`.yaml and the files it starts from set."""
    path = model_folder().joinpath(f"{name}.yaml")
    fields = OmegaConf.to_container(OmegaConf.create(path.read_text(encoding="utf-8")), resolve=True)
    parents = [entry for entry in fields.pop("defaults", []) if entry != "_self_" and not entry.startswith("/")]
    values = {key: value for parent in parents for key, value in model_preset(parent).items()}
    values.update({key: value for key, value in fields.items() if key not in CHECKPOINT_KEYS})
    return values
