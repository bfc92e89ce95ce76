"""The GLUE suite's tasks (bertlab.training.suites.glue): every task config composes (local copy or hub id) with its
metrics."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from bertlab.training.launch.config_tree import register_configs
from bertlab.training.suites.glue import GLUE_TASKS

METRICS = {"cola": ["mcc"], "sst2": ["accuracy"], "mrpc": ["f1", "accuracy"], "stsb": ["pearson", "spearman"],
           "qqp": ["f1", "accuracy"], "mnli": ["accuracy"], "mnli_mm": ["accuracy"], "qnli": ["accuracy"],
           "rte": ["accuracy"], "wnli": ["accuracy"]}


@pytest.mark.parametrize("task", GLUE_TASKS)
def test_every_glue_task_composes_with_its_metrics_and_source(task, tmp_path, monkeypatch):
    register_configs()
    GlobalHydra.instance().clear()
    (tmp_path / "glue" / "cola").mkdir(parents=True)  # a data folder holding only CoLA, laid out as shared/data
    monkeypatch.setenv("BERTLAB_DATA_DIR", str(tmp_path))
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose("fine_tune", overrides=[f"+glue={task}"])
    assert cfg.glue.task == task and list(cfg.glue.metrics) == METRICS[task]
    assert cfg.monitor == f"val/{METRICS[task][0]}"
    hub = "nyu-mll/glue:" + ("mnli" if task == "mnli_mm" else task)
    assert cfg.data.source == (str(tmp_path / "glue" / "cola") if task == "cola" else hub)
    assert cfg.data.num_labels == (1 if task == "stsb" else 3 if task.startswith("mnli") else 2)
