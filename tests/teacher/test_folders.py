"""A classifier teacher's folder checked before a distillation starts (bertlab.teacher.folders): named, there,
with readable weights that hold a trained classifier's head, predicting the student's labels; each refusal
one line that names the folder."""

from __future__ import annotations

import re

import pytest
from safetensors.torch import load_file, save_file

from bertlab.checkpoint.dispatch import WEIGHTS_NAME
from bertlab.errors import CheckpointError, ConfigError
from bertlab.model import BertForMaskedLM, BertForSequenceClassification, BertModel
from bertlab.teacher.folders import check_labels, label_names, teacher_config, teacher_folder
from tests.factories import small_config

EXPECTED, EXAMPLE = "a classifier folder", "outputs/sst2/latest/hf_model"
NAMED = small_config(id2label={0: "negative", 1: "positive"})


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("teacher", [None, ""])
def test_an_unset_teacher_is_a_one_line_config_error_saying_what_to_name(teacher):
    with pytest.raises(ConfigError) as error:
        teacher_folder(teacher, EXPECTED, EXAMPLE)
    assert one_line(error) == "task.teacher is not set: name the teacher, a classifier folder"


@pytest.mark.parametrize("where", ["missing", "a file"])
def test_a_teacher_that_is_no_folder_is_a_one_line_error_naming_the_path_and_an_example(tmp_path, where):
    path = tmp_path / "teacher"
    if where == "a file":
        path.write_text("not a folder")
    with pytest.raises(CheckpointError) as error:
        teacher_folder(str(path), EXPECTED, EXAMPLE)
    assert one_line(error) == (f"task.teacher={path}: no such folder; expected a classifier folder with its "
                               "config.json, model.safetensors and tokenizer, such as outputs/sst2/latest/hf_model")


def test_a_teacher_folder_is_returned_as_the_path_it_names(tmp_path):
    assert teacher_folder(str(tmp_path), EXPECTED, EXAMPLE) == tmp_path


def test_a_classifier_folders_config_is_the_one_it_was_saved_with(tmp_path):
    BertForSequenceClassification(small_config(id2label={0: "a", 1: "b", 2: "c"})).save_pretrained(tmp_path)
    config = teacher_config(str(tmp_path))
    assert config.num_labels == 3 and label_names(config) == ["a", "b", "c"]
    assert (config.hidden_size, config.num_hidden_layers) == (32, 2)


def without_pooler(folder):
    BertForSequenceClassification(small_config()).save_pretrained(folder)
    weights = load_file(folder / WEIGHTS_NAME)
    save_file({name: tensor for name, tensor in weights.items() if ".pooler." not in name}, folder / WEIGHTS_NAME)


@pytest.mark.parametrize("save, missing", [
    (lambda folder: BertForMaskedLM(small_config()).save_pretrained(folder), "classifier.weight"),
    (lambda folder: BertModel(small_config()).save_pretrained(folder), "classifier.weight"),
    (without_pooler, "pooler.dense.weight"),
], ids=["masked LM", "encoder with a pooler", "classifier without a pooler"])
def test_a_folder_without_a_trained_classifiers_head_is_a_one_line_error_naming_what_it_lacks(tmp_path, save,
                                                                                              missing):
    save(tmp_path)
    with pytest.raises(CheckpointError) as error:
        teacher_config(str(tmp_path))
    assert one_line(error) == (f"task.teacher={tmp_path}: not a trained classifier, its model.safetensors has no "
                               f"{missing}; distil from a fine-tuned BertForSequenceClassification")


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_unreadable_weights_are_a_one_line_error_naming_the_folder(tmp_path, damage):
    BertForSequenceClassification(small_config()).save_pretrained(tmp_path)
    if damage == "deleted":
        (tmp_path / WEIGHTS_NAME).unlink()
    else:
        (tmp_path / WEIGHTS_NAME).write_bytes(b"no safetensors header here")
    with pytest.raises(CheckpointError) as error:
        teacher_config(str(tmp_path))
    assert re.fullmatch(rf"task\.teacher={re.escape(str(tmp_path))}: no readable model\.safetensors \(.+\)",
                        one_line(error))


def test_label_names_are_the_configs_names_or_label_and_the_index():
    assert label_names(NAMED) == ["negative", "positive"]
    assert label_names(small_config(num_labels=3)) == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert label_names(small_config(num_labels=1)) == ["LABEL_0"]


@pytest.mark.parametrize("teacher_labels, student", [
    (small_config(id2label={0: "negative", 1: "positive"}), NAMED),
    (small_config(num_labels=3), small_config(num_labels=3)),
    (small_config(id2label={0: "score"}), small_config(id2label={0: "similarity"})),  # regression: no names
], ids=["same names", "unnamed", "regression"])
def test_a_teacher_of_the_students_labels_is_accepted(teacher_labels, student):
    check_labels("teacher", teacher_labels, student)


@pytest.mark.parametrize("teacher_labels, predicts, student, task", [
    (small_config(id2label={0: "a", 1: "b", 2: "c"}), "3 labels (a, b, c)", NAMED, "2 labels (negative, positive)"),
    (small_config(id2label={0: "positive", 1: "negative"}), "2 labels (positive, negative)", NAMED,
     "2 labels (negative, positive)"),
    (small_config(), "2 labels (LABEL_0, LABEL_1)", NAMED, "2 labels (negative, positive)"),
    (small_config(num_labels=1), "1 value (regression)", NAMED, "2 labels (negative, positive)"),
    (NAMED, "2 labels (negative, positive)", small_config(num_labels=1), "1 value (regression)"),
], ids=["other number", "other order", "unnamed", "regression teacher", "regression task"])
def test_a_teacher_of_other_labels_is_a_one_line_error_describing_both(teacher_labels, predicts, student, task):
    with pytest.raises(ConfigError) as error:
        check_labels("runs/teacher/hf_model", teacher_labels, student)
    assert one_line(error) == (f"task.teacher=runs/teacher/hf_model: the teacher predicts {predicts} but the task "
                               f"has {task}; distil from a teacher fine-tuned on the same labels")
