"""The config tree's resolvers (bertlab.training.launch.config_tree): `local_or_hub` reads the local copy where the
data folder holds it, and says so in the log when a configured data folder does not."""

from __future__ import annotations

import logging

from bertlab.training.launch.config_tree import local_or_hub, warn_hub_instead


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
