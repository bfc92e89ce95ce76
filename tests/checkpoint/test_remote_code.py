"""A remote-code export's files (the export itself loads in transformers in tests/checkpoint/test_modernbert.py)."""

from __future__ import annotations

import json

from bertlab.checkpoint.remote_code import carried_modules, code_files, config_text
from tests.factories import small_config


def test_an_export_carries_the_modelling_modules_and_no_format_tokenizer_or_training_loss_code():
    # value_rules: BertConfig's fields carry their rules, which its own checks run
    assert sorted(carried_modules()) == ["bertlab_config.py", "bertlab_errors.py", "bertlab_model.py",
                                         "bertlab_value_rules.py"]


def test_the_modelling_adapter_imports_every_carried_module_for_transformers_to_copy():
    files = code_files()
    assert all(f"from .{name[:-3]} import" in files["modeling_bertlab.py"] for name in carried_modules())
    assert sorted(set(files) - set(carried_modules())) == ["modeling_bertlab.py"]


def test_the_auto_map_names_classes_of_the_adapter_for_the_config_and_every_model():
    auto_map = json.loads(config_text(small_config(position_embedding_type="rotary"), "BertForMaskedLM"))["auto_map"]
    adapter = code_files()["modeling_bertlab.py"]
    assert auto_map["AutoConfig"] == "modeling_bertlab.BertlabConfig" and "AutoModelForMaskedLM" in auto_map
    assert all(module == "modeling_bertlab" and f"\nclass {name}(" in adapter
               for module, name in (reference.split(".") for reference in auto_map.values()))
