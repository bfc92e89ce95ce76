"""The recipes shipped in the package (bertlab.recipe_files): their names, the command each is for, and the folder
a run needs made first, refused in one line that names the command making it."""

from __future__ import annotations

import pytest

from bertlab.errors import CheckpointError
from bertlab.recipe_files import (check_requirements, folder_keys, output_of, producing_command, recipe_command,
                                  recipe_names, recipe_requirements, recipe_text)


def test_the_recipes_are_the_packaged_yaml_files_by_name():
    names = recipe_names()
    assert names == sorted(names)
    assert {"mlm_tiny", "mlm_tiny_wiki", "sst2", "conll2003"} <= set(names)
    assert recipe_text("mlm_tiny").startswith("# @package _global_")
    assert recipe_text("no_such_recipe") is None


def test_a_recipe_is_for_its_own_command_or_that_of_the_recipe_it_extends():
    assert recipe_command("mlm_tiny") == "train"
    assert recipe_command("sst2") == "fine-tune"
    assert all(recipe_command(name) in ("train", "fine-tune") for name in recipe_names())


def test_the_folder_a_command_writes_is_the_name_after_its_output_flag():
    assert output_of("python -m bertlab shrink model --layers 2 --output outputs/bert_tiny_minilm") == "bert_tiny_minilm"
    assert output_of("python -m bertlab train +recipe=mlm_tiny") is None
    assert output_of("python -m bertlab shrink model --output") is None  # a flag without its value names nothing


def test_a_missing_folder_is_refused_naming_the_recipes_own_command(tmp_path):
    requires = recipe_requirements("sst2_distill")
    assert requires["task.teacher"] == "python -m bertlab fine-tune +recipe=sst2_minilm"
    keys = folder_keys(requires)
    assert keys[0] == "model.init_from" and "task.teacher" in keys
    missing = str(tmp_path / "teacher")
    with pytest.raises(CheckpointError, match=f"^task.teacher={missing}: no such checkpoint folder; make one first "
                                              "with: python -m bertlab fine-tune \\+recipe=sst2_minilm$"):
        check_requirements({"model.init_from": None, "task.teacher": missing}, requires, "sst2_distill", overridden=())
    check_requirements({"model.init_from": None, "task.teacher": str(tmp_path)}, requires, "sst2_distill", overridden=())


def test_a_folder_the_command_line_chose_is_hinted_by_the_recipe_that_makes_it(tmp_path):
    latest = tmp_path / "outputs" / "mlm_tiny" / "latest"
    assert producing_command(latest, "sst2") == "python -m bertlab train +recipe=mlm_tiny"
    with pytest.raises(CheckpointError, match=r"make one first with: python -m bertlab train \+recipe=mlm_tiny$"):
        check_requirements({"model.init_from": str(latest)}, {"model.init_from": "python -m bertlab train +recipe=x"},
                           "sst2", overridden=("model.init_from",))
    assert producing_command(tmp_path / "bert_tiny_minilm", "sst2").endswith("--output outputs/bert_tiny_minilm")
    assert producing_command(tmp_path / "nothing_makes_this", "sst2") is None
