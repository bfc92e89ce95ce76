"""The data module a task reads its texts from (bertlab.lit.task_data): the trainer's, when of the kind the task
needs, else a one-line ConfigError naming the task, the kind, the config that gives one and what the trainer has."""

from __future__ import annotations

from types import SimpleNamespace

import lightning as L
import pytest

from bertlab.errors import ConfigError
from bertlab.lit.task_data import task_data


class SentencesData(L.LightningDataModule):
    pass


class OtherData(L.LightningDataModule):
    pass


class Task:
    def __init__(self, datamodule: L.LightningDataModule | None) -> None:
        self.trainer = SimpleNamespace(datamodule=datamodule)


def test_the_trainers_data_module_of_the_kind_the_task_needs_is_returned():
    data = SentencesData()
    assert task_data(Task(data), SentencesData, "its texts") is data


@pytest.mark.parametrize("datamodule, has", [(OtherData(), "OtherData"), (None, "NoneType")])
def test_a_data_module_of_another_kind_is_refused_in_one_line(datamodule, has):
    with pytest.raises(ConfigError, match=f"^Task reads its texts from a SentencesData \\(data=sentences\\); "
                                          f"the trainer has {has}$"):
        task_data(Task(datamodule), SentencesData, "its texts", " (data=sentences)")
