"""Exports that carry their own modelling code, for the variants transformers has no class for (BERT
with rotary positions, pre-norm, a gated feed-forward, … — any mix that is neither BERT nor ModernBERT).

The folder holds transformers' custom-code convention: `config.json` with `model_type: bertlab` and an
`auto_map`, the adapter beside this file (modeling_bertlab.py: transformers' PretrainedConfig and
PreTrainedModel classes around bertlab's own, AutoConfig's class included), and bertlab's modules
themselves: bertlab.model and what it imports (its config, the value rules the config's fields declare, the errors
they raise; no checkpoint-format code, nor the training step's masked-LM loss: the adapter computes a loss from the
logits; nor the rules only a run's arguments declare, bertlab.argument_checks), copied from the installed package at
export time with `from bertlab.x import` rewritten to `from .bertlab_x import` (transformers copies and imports a
folder's modules through relative imports only). So the code that runs in transformers is, line for line, the code
that trained the model: no second copy of it lives in this repository, and an export always matches the bertlab
that wrote it. `AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)` then needs torch, safetensors
and tokenizers, not bertlab.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from bertlab.config import BertConfig

MODEL_TYPE = "bertlab"
TOKENIZER_INPUT_NAMES = None  # the tokenizer's own: bertlab's model takes token_type_ids
ADAPTER = Path(__file__).with_name("modeling_bertlab.py")  # transformers' config and model classes
PACKAGE = ADAPTER.parents[2]  # bertlab/
ENTRY_MODULE = "model"  # bertlab.model, and every bertlab module it imports
AUTO_CLASSES = {"AutoConfig": "BertlabConfig", "AutoModel": "BertlabModel",
                "AutoModelForMaskedLM": "BertlabForMaskedLM", "AutoModelForPreTraining": "BertlabForPreTraining",
                "AutoModelForSequenceClassification": "BertlabForSequenceClassification",
                "AutoModelForTokenClassification": "BertlabForTokenClassification",
                "AutoModelForQuestionAnswering": "BertlabForQuestionAnswering"}
_IMPORT = re.compile(r"^(\s*)from bertlab\.([\w.]+) import ", re.MULTILINE)


def remote_name(module: str) -> str:
    """bertlab.model → bertlab_model (a flat file name: transformers follows `from .name import` only)."""
    return "bertlab_" + module.replace(".", "_")


def _source(module: str) -> str:
    path = PACKAGE.joinpath(*module.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(encoding="utf-8")


def carried_modules() -> dict[str, str]:
    """{file name: source} of bertlab.model and the bertlab modules it imports, transitively, with
    their bertlab imports made relative."""
    files, pending = {}, [ENTRY_MODULE]
    while pending:
        module = pending.pop()
        if remote_name(module) + ".py" in files:
            continue
        source = _source(module)
        if re.search(r"^\s*(import bertlab|from bertlab import)", source, re.MULTILINE):
            raise RuntimeError(f"bertlab.{module}: the remote-code export follows `from bertlab.x import` only")
        pending += [name for _, name in _IMPORT.findall(source)]
        files[remote_name(module) + ".py"] = _IMPORT.sub(
            lambda match: f"{match.group(1)}from .{remote_name(match.group(2))} import ", source)
    return files


def code_files() -> dict[str, str]:
    """Every .py file of a remote-code export: the adapter and the carried bertlab modules. The adapter
    imports each carried module itself (those its own imports do not name are imported at the end): transformers
    copies a local folder's files into its module cache only one relative import deep."""
    carried, adapter = carried_modules(), ADAPTER.read_text(encoding="utf-8")
    imports = "".join(f"from .{name[:-3]} import __name__ as _{name[:-3]}  # noqa: F401\n" for name in sorted(carried)
                      if f"from .{name[:-3]} import" not in adapter)
    adapter += ("\n\n# Generated at export (bertlab.checkpoint.remote_code): the modules for transformers to copy.\n"
                + imports)
    return {ADAPTER.name: adapter, **carried}


def detect(values: dict[str, Any]) -> bool:
    return values.get("model_type") == MODEL_TYPE


def saves(config: BertConfig, model_class: str) -> bool:
    """Any model: its own code runs it, whatever its mix of knobs."""
    return True


def config_values(values: dict[str, Any]) -> dict[str, Any]:
    """BertConfig's fields from a remote-code config.json: bertlab's own, its architectures named as the
    export's classes (BertlabForMaskedLM) rather than bertlab's (BertForMaskedLM)."""
    architectures = [name.replace("Bertlab", "Bert", 1) for name in values.get("architectures") or []]
    return {**values, "architectures": architectures}


def to_state(state: dict[str, torch.Tensor], config: BertConfig, model_class: str) -> dict[str, torch.Tensor]:
    return state  # the export's classes adopt bertlab's modules, and so its names


def from_state(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    return state


def config_text(config: BertConfig, architecture: str) -> str:
    """config.json of a remote-code export: bertlab's values under `model_type: bertlab`, with the
    auto_map that tells transformers which class of the folder to build."""
    values = json.loads(config.to_json_string(architecture=architecture.replace("Bert", "Bertlab", 1)))
    values["model_type"] = MODEL_TYPE
    values["auto_map"] = {auto: f"{ADAPTER.stem}.{name}" for auto, name in AUTO_CLASSES.items()}
    return json.dumps(values, indent=2, sort_keys=True) + "\n"
