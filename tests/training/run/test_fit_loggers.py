"""Loggers as config options (the Trainer's loggers, bertlab.training.run.fit): `logger=tensorboard` and
`logger=mlflow` record a run beside the metrics.csv every option keeps (a logger whose package is missing:
tests/training/checks/test_environment.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_module

from bertlab.training.launch.config_tree import register_configs
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process, sentiment_tokenizer

SHORT = ["trainer.max_steps=4", "trainer.val_check_interval=2", "trainer.log_every_n_steps=1"]


def logged_losses(run_dir: Path) -> list[float]:
    return pd.read_csv(run_dir / "metrics.csv")["train/loss"].dropna().tolist()


@pytest.mark.parametrize("option", ["tensorboard", "mlflow", "wandb", "[tensorboard,mlflow]"])
def test_every_logger_option_keeps_the_csv_logger(option):
    register_configs()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"logger={option}"])
    expected = ["csv", *option.strip("[]").split(",")]
    assert list(cfg.logger) == expected
    assert cfg.logger.csv._target_ == "lightning.pytorch.loggers.CSVLogger"


@pytest.mark.slow
def test_tensorboard_records_the_training_metrics(tiny_data_dir, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", run, "logger=tensorboard", *SHORT), capsys)
    assert outcome.code == 0, outcome.err
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    accumulator = EventAccumulator(str(events[0]))
    accumulator.Reload()
    assert {"train/loss", "val/loss", "val/accuracy"} <= set(accumulator.Tags()["scalars"])
    losses = [event.value for event in accumulator.Scalars("train/loss")]
    assert losses == pytest.approx(logged_losses(run))  # the same values as metrics.csv


@pytest.mark.slow
def test_mlflow_records_the_run_in_the_run_folder(tiny_data_dir, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    tokenizer = sentiment_tokenizer(tiny_data_dir, tmp_path / "tokenizer")
    run = tmp_path / "run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, tokenizer, run, "logger=mlflow", "data.limit_train_samples=32",
                                         "data.limit_eval_samples=16", *SHORT), capsys)
    assert outcome.code == 0, outcome.err
    client = MlflowClient(tracking_uri=f"sqlite:///{run / 'mlflow.db'}")
    [experiment] = [e for e in client.search_experiments() if e.name == "sst2"]
    [mlflow_run] = client.search_runs([experiment.experiment_id])
    assert mlflow_run.data.params["config/hidden_size"] == "32"  # the hyperparameters too
    assert {"train/loss", "val/loss", "val/accuracy"} <= set(mlflow_run.data.metrics)
    losses = [metric.value for metric in client.get_metric_history(mlflow_run.info.run_id, "train/loss")]
    assert losses == pytest.approx(logged_losses(run))
    assert not list(Path.cwd().glob("mlruns")) and not list(Path.cwd().glob("mlartifacts"))
