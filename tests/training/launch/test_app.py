"""The launch (bertlab.training.launch.app): the configs it checks before Hydra makes anything, composed as Hydra
runs them."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from bertlab.errors import UsageError
from bertlab.training.launch.app import SweepJob, checked_configs, flags_first, launch
from bertlab.training.run.fit import run_training
from bertlab.training.launch.config_tree import CONFIG_MODULE, register_configs


def test_a_sweep_is_composed_for_checking_job_by_job_before_anything_is_made(tmp_path):
    register_configs()
    GlobalHydra.instance().clear()
    sweep = tmp_path / "sweep"
    overrides = ["seed=3,4", f"hydra.sweep.dir={sweep}", "hydra.mode=MULTIRUN"]
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        configs = list(checked_configs(GlobalHydra.instance().hydra, "train", overrides, RunMode.MULTIRUN))
    sweep_config, *jobs = configs
    assert sweep_config[1:] == (None, False)
    assert [(config.seed, run_dir, new_run) for config, run_dir, new_run in jobs] == [
        (3, sweep / "0", False), (4, sweep / "1", False)]
    assert not sweep.exists()


def test_a_run_is_composed_for_checking_as_hydra_runs_it(tmp_path):
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        [(config, run_dir, new_run)] = checked_configs(GlobalHydra.instance().hydra, "train",
                                                       ["seed=5", f"hydra.run.dir={tmp_path}/run"], RunMode.RUN)
    assert (config.seed, run_dir, new_run) == (5, tmp_path / "run", True)
    assert not (tmp_path / "run").exists()


def test_a_config_dir_that_is_no_folder_is_refused_before_anything_runs(tmp_path):
    ran = []
    with pytest.raises(UsageError, match=f"^command line: --config-dir {tmp_path}/none: no such folder$"):
        launch("train", ran.append, ["-cd", f"{tmp_path}/none", f"hydra.run.dir={tmp_path}/run"], "bertlab train")
    assert ran == [] and not (tmp_path / "run").exists()


def test_a_job_of_a_sweep_unpickled_in_a_process_of_its_own_has_bertlabs_resolvers(tmp_path):
    (tmp_path / "job.pkl").write_bytes(pickle.dumps(SweepJob(run_training)))
    script = ("import pickle, sys; from omegaconf import OmegaConf; "
              "pickle.loads(open(sys.argv[1], 'rb').read()); print(OmegaConf.has_resolver('local_or_hub'))")
    output = subprocess.run([sys.executable, "-c", script, str(tmp_path / "job.pkl")], capture_output=True, text=True,
                            check=True).stdout
    assert output.strip() == "True"


def test_flags_go_before_the_overrides_with_their_values():
    assert flags_first(["+recipe=sst2", "-m", "seed=1,2"]) == ["-m", "+recipe=sst2", "seed=1,2"]
    assert flags_first(["a=1", "--cfg", "job", "b=2"]) == ["--cfg", "job", "a=1", "b=2"]
    with pytest.raises(UsageError, match="command line: unknown flag --frobnicate"):
        flags_first(["a=1", "--frobnicate"])
    with pytest.raises(UsageError, match=r"--cfg needs a value \(job, hydra, all\)"):
        flags_first(["--cfg", "a=1"])
