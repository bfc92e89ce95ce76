"""A teacher's folder, checked before a distillation starts: there, a trained classifier, and predicting
the student's labels."""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError, safe_open

from bertlab.checkpoint.dispatch import CONFIG_NAME, WEIGHTS_NAME, read_config
from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, ConfigError


def teacher_config(teacher: str | None) -> BertConfig:
    """The config of the classifier folder `teacher` (task.teacher), or a one-line error."""
    folder = teacher_folder(teacher, "a classifier folder (a fine-tune run's hf_model, or a Hugging Face "
                                     "BertForSequenceClassification folder)", "outputs/sst2/latest/hf_model")
    config = read_config(folder)
    try:
        with safe_open(folder / WEIGHTS_NAME, framework="pt") as weights:
            names = set(weights.keys())
    except (OSError, SafetensorError) as error:
        raise CheckpointError(f"task.teacher={teacher}: no readable {WEIGHTS_NAME} ({error})") from None
    # What a masked-LM or encoder-only checkpoint lacks: its classifier would be random.
    head = [name for name in ("pooler.dense.weight", "classifier.weight")
            if not any(key.endswith(name) for key in names)]
    if head:
        raise CheckpointError(f"task.teacher={teacher}: not a trained classifier, its {WEIGHTS_NAME} has no "
                              f"{head[-1]}; distil from a fine-tuned BertForSequenceClassification")
    return config


def teacher_folder(teacher: str | None, expected: str, example: str) -> Path:
    """The folder `teacher` (task.teacher) names, or a one-line error saying what was `expected`."""
    if not teacher:
        raise ConfigError(f"task.teacher is not set: name the teacher, {expected}")
    folder = Path(teacher)
    if not folder.is_dir():
        raise CheckpointError(f"task.teacher={teacher}: no such folder; expected {expected} with its "
                              f"{CONFIG_NAME}, {WEIGHTS_NAME} and tokenizer, such as {example}")
    return folder


def label_names(config: BertConfig) -> list[str]:
    return [(config.id2label or {}).get(i, f"LABEL_{i}") for i in range(config.num_labels)]


def check_labels(teacher: str, teacher_labels: BertConfig, student: BertConfig) -> None:
    """The teacher predicts the student's labels: as many, with the same names in the same order
    (regression: one value each)."""
    def described(config: BertConfig) -> str:
        return "1 value (regression)" if config.num_labels == 1 else \
            f"{config.num_labels} labels ({', '.join(label_names(config))})"

    names_differ = student.num_labels > 1 and label_names(teacher_labels) != label_names(student)
    if teacher_labels.num_labels != student.num_labels or names_differ:
        raise ConfigError(f"task.teacher={teacher}: the teacher predicts {described(teacher_labels)} but the task "
                          f"has {described(student)}; distil from a teacher fine-tuned on the same labels")
