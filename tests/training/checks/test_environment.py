"""The optional extras a config needs (bertlab.training.checks.environment): a logger whose package is missing is
refused in one line before any folder is made; a sweeper or launcher plugin that is missing names its extra."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException

from bertlab.training.checks import environment
from bertlab.training.launch.app import config_message
from tests.bertlab_runs import pretraining, run_in_process


def test_a_missing_logger_package_is_one_line_before_any_folder(tiny_data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(environment, "installed", lambda package: package != "mlflow")
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
