"""What a run needs of its surroundings (bertlab.training.checks.environment): a logger whose package is missing is
refused in one line before any folder is made; a sweeper or launcher plugin that is missing names its extra; and
the checks of a run's folder before it is written."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException

from bertlab.errors import ConfigError
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


def test_an_output_folder_below_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    environment.check_output_folder(tmp_path / "new" / "run")
    with pytest.raises(ConfigError, match=f"output folder {tmp_path}/file/run cannot be created: "
                                          f"{tmp_path}/file is not a folder"):
        environment.check_output_folder(tmp_path / "file" / "run")


def test_the_run_folder_of_a_finished_run_is_refused_unless_resumed(tmp_path):
    environment.check_run_folder(tmp_path / "new", None)
    (tmp_path / "config.yaml").write_text("")  # a failed start left only its config: not a run's results
    environment.check_run_folder(tmp_path, None)
    (tmp_path / "metrics.csv").write_text("step\n")
    with pytest.raises(ConfigError, match="already holds a run \\(metrics.csv\\)"):
        environment.check_run_folder(tmp_path, None)
    environment.check_run_folder(tmp_path, "auto")
    environment.check_run_folder(tmp_path, str(tmp_path / "lightning_checkpoints" / "last.ckpt"))
