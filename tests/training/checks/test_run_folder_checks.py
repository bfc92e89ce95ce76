"""The checks of a run's folder before it is written (bertlab.training.checks.run_folder_checks)."""

from __future__ import annotations

import pytest

from bertlab.errors import ConfigError
from bertlab.training.checks import run_folder_checks


def test_an_output_folder_below_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    run_folder_checks.check_output_folder(tmp_path / "new" / "run")
    with pytest.raises(ConfigError, match=f"output folder {tmp_path}/file/run cannot be created: "
                                          f"{tmp_path}/file is not a folder"):
        run_folder_checks.check_output_folder(tmp_path / "file" / "run")


def test_the_run_folder_of_a_finished_run_is_refused_unless_resumed(tmp_path):
    run_folder_checks.check_run_folder(tmp_path / "new", None)
    (tmp_path / "config.yaml").write_text("")  # a failed start left only its config: not a run's results
    run_folder_checks.check_run_folder(tmp_path, None)
    (tmp_path / "metrics.csv").write_text("step\n")
    with pytest.raises(ConfigError, match="already holds a run \\(metrics.csv\\)"):
        run_folder_checks.check_run_folder(tmp_path, None)
    run_folder_checks.check_run_folder(tmp_path, "auto")
    run_folder_checks.check_run_folder(tmp_path, str(tmp_path / "lightning_checkpoints" / "last.ckpt"))
