"""The tokenizer group's keys (conf/tokenizer/wordpiece.yaml, typed by bertlab.training.launch.config_tree) reach the data
module that trains the vocabulary, and a bad value is refused in one line before a run folder exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from bertlab.tokenizer import WordPieceOptions
from bertlab.training.launch.config_tree import register_configs
from tests.bertlab_runs import pretraining, run_in_process


def composed_data_module(*overrides: str):
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        cfg = compose("train", overrides=["+recipe=mlm_tiny", *overrides])
    return instantiate(cfg.data)


def test_the_default_options_reach_the_data_module_as_bert_s():
    assert composed_data_module().tokenizer_options == WordPieceOptions()


def test_each_tokenizer_key_reaches_the_data_module():
    data = composed_data_module("tokenizer.lowercase=false", "tokenizer.strip_accents=true",
                                "tokenizer.tokenize_chinese_chars=false", "tokenizer.never_split=['[URL]','<num>']",
                                "tokenizer.max_input_chars_per_word=50")
    assert data.tokenizer_options == WordPieceOptions(lowercase=False, strip_accents=True, tokenize_chinese_chars=False,
                                                      never_split=("[URL]", "<num>"), max_input_chars_per_word=50)


@pytest.mark.parametrize("override, message", [
    ("tokenizer.strip_accents=maybe", "tokenizer.strip_accents='maybe': expected boolean or null, got str"),
    ("tokenizer.tokenize_chinese_chars=null", "tokenizer.tokenize_chinese_chars=None: expected bool"),
    ("tokenizer.max_input_chars_per_word=0", "tokenizer.max_input_chars_per_word=0: must be in [1, inf)"),
    ("tokenizer.max_input_chars_per_word=2.5", "tokenizer.max_input_chars_per_word=2.5: expected int"),
    ("tokenizer.never_split=URL", "tokenizer.never_split='URL': expected list"),
    ("tokenizer.never_split=[[URL]]", "tokenizer.never_split=[['URL']]: must be a list of tokens, text without spaces "
                                      "such as [URL]; ['URL'] is not a token"),  # [URL] unquoted: a list
    ("tokenizer.never_split=['[URL]','two words']",
     "tokenizer.never_split=['[URL]', 'two words']: must be a list of tokens, text without spaces such as [URL]; "
     "'two words' is not a token"),
    ("tokenizer.colour=red", "unknown config key 'tokenizer.colour'; 'tokenizer' has: path, vocab_size, lowercase"),
])
def test_a_bad_tokenizer_value_is_one_line_before_the_run_folder_exists(override, message, tiny_data_dir: Path,
                                                                        tmp_path: Path, capsys):
    run = tmp_path / "run"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", run, override), capsys)
    assert outcome.code == 1
    assert outcome.error_lines == [outcome.error_lines[-1]] and outcome.error_lines[-1].startswith("bertlab: error: ")
    assert message in outcome.error_lines[-1]
    assert not run.exists()
