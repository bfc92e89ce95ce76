"""The launch (bertlab.training.app): its resolvers (`local_or_hub` reads the local copy where the data folder
holds it, and says so in the log when a configured data folder does not), and the configs it checks before
Hydra makes anything."""

from __future__ import annotations

import logging

from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from bertlab.training.app import CONFIG_MODULE, checked_configs, local_or_hub, register_configs, warn_hub_instead


def test_the_local_copy_is_read_where_the_data_folder_holds_it(tmp_path, caplog):
    (tmp_path / "corpus_large").mkdir()
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        assert local_or_hub(str(tmp_path), "corpus_large", "Salesforce/wikitext") == str(tmp_path / "corpus_large")
        assert local_or_hub(None, "corpus_large", "Salesforce/wikitext") == "Salesforce/wikitext"
    assert caplog.records == []


def test_a_data_folder_without_the_copy_falls_back_to_the_hub_with_a_warning_naming_both(tmp_path, caplog):
    warn_hub_instead.cache_clear()
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        for _ in range(3):  # OmegaConf resolves at every access: one warning
            assert local_or_hub(str(tmp_path), "corpus_large", "Salesforce/wikitext") == "Salesforce/wikitext"
    assert [record.getMessage() for record in caplog.records] == [
        f"BERTLAB_DATA_DIR={tmp_path} has no corpus_large: reading Salesforce/wikitext from the Hugging Face hub instead"]


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
