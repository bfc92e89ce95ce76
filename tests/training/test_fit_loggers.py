"""Loggers as config options: `logger=tensorboard` and `logger=mlflow` record a run beside the
metrics.csv every option keeps, and a logger whose package is missing is refused in one line before
any folder is made; a sweeper or launcher plugin that is missing names its extra."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from hydra.errors import MissingConfigException

from bertlab.training import extras
from bertlab.training.app import config_message, register_configs
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


def test_a_missing_logger_package_is_one_line_before_any_folder(tiny_data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(extras, "installed", lambda package: package != "mlflow")
    run = tmp_path / "run"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", run, "logger=mlflow"), capsys)
    assert outcome.code == 1
    assert outcome.error_lines == ['bertlab: error: logger=mlflow needs the mlflow package: pip install -e ".[mlflow]"']
    assert not run.exists()


@pytest.mark.parametrize("config_path, message", [
    ("hydra/sweeper/optuna",
     'hydra/sweeper=optuna needs Hydra\'s hydra-optuna-sweeper plugin: pip install -e ".[optuna]"'),
    ("hydra/launcher/submitit_slurm",
     'hydra/launcher=submitit_slurm needs Hydra\'s hydra-submitit-launcher plugin: pip install -e ".[submitit]"'),
])
def test_a_missing_plugin_names_its_extra(config_path, message):
    # What Hydra raises for hydra/sweeper=optuna when the plugin is not installed: no such config.
    error = MissingConfigException(f"Could not find '{config_path}'", missing_cfg_file=config_path, options=["basic"])
    assert config_message(error, error) == message
