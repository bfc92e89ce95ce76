"""The tokenizer group's training options (bertlab.tokenizer.WordPieceOptions: transformers' BasicTokenizer
options) are saved with the vocabulary so that transformers' BertTokenizer and BertTokenizerFast give
bertlab's ids; `bertlab.tokenizer.BertTokenizer` offers transformers' token-level methods."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from bertlab.errors import CheckpointError, ConfigError
from bertlab.tokenizer import BertTokenizer, WordPieceOptions, load_tokenizer, save_tokenizer, train_tokenizer

transformers = pytest.importorskip("transformers")

TEXTS = [
    "Héllo wörld! Café naïve résumé, Crème brûlée and Ünïcödé accents.",
    "北京 and 東京 are cities; 中文字 日本語 words.",
    "Links such as [URL] and numbers like <num> stay whole: see [URL] twice.",
    "The quick brown fox jumps over the lazy dog " + "a" * 100 + " " + "b" * 101,
] * 10
ACCENTED = ["Café NAÏVE résumé, Ünïcödé!", "crème Brûlée wörld"]
CJK = ["北京欢迎你 東京です", "中文字and日本語"]
NEVER_SPLIT = ["see [URL]here and <num>, [url] too", "x[URL]y [MASK] <num>"]
LONG_WORDS = ["a" * 100 + " fox", "b" * 101 + " dog", "the " + "a" * 250]


def trained(**options) -> object:
    return train_tokenizer(TEXTS, vocab_size=400, min_frequency=1, **options)


def transformers_tokenizers(tokenizer, directory: Path) -> tuple:
    save_tokenizer(tokenizer, directory)
    return (transformers.BertTokenizerFast.from_pretrained(directory),
            transformers.BertTokenizer.from_pretrained(directory))


def assert_same_ids(tokenizer, directory: Path, texts: list[str]) -> None:
    for reference in transformers_tokenizers(tokenizer, directory):
        for text in texts:
            assert reference(text)["input_ids"] == tokenizer.encode(text).ids, (type(reference).__name__, text)


@pytest.mark.parametrize("lowercase, strip_accents", itertools.product([True, False], [None, True, False]))
def test_both_transformers_tokenizers_give_the_ids_of_every_casing_and_accent_setting(lowercase, strip_accents,
                                                                                      tmp_path):
    tokenizer = trained(lowercase=lowercase, strip_accents=strip_accents)
    assert_same_ids(tokenizer, tmp_path, ACCENTED + NEVER_SPLIT)
    strips = lowercase if strip_accents is None else strip_accents
    tokens = tokenizer.encode("café", add_special_tokens=False).tokens
    assert ("é" not in "".join(tokens)) == strips


def test_accents_are_stripped_or_kept_whatever_the_casing():
    def words(**options) -> list[str]:
        return [token for token in trained(**options).encode("Café", add_special_tokens=False).tokens]

    assert words(lowercase=True) == words(lowercase=True, strip_accents=True) == ["cafe"]
    assert words(lowercase=True, strip_accents=False) == ["café"]
    assert words(lowercase=False) == words(lowercase=False, strip_accents=False) == ["Café"]
    assert words(lowercase=False, strip_accents=True) == ["Cafe"]


@pytest.mark.parametrize("tokenize_chinese_chars", [True, False])
def test_both_transformers_tokenizers_give_the_ids_of_cjk_text(tokenize_chinese_chars, tmp_path):
    tokenizer = trained(tokenize_chinese_chars=tokenize_chinese_chars)
    assert_same_ids(tokenizer, tmp_path, CJK)
    words = [word for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str("北京欢迎你"))]
    assert words == (list("北京欢迎你") if tokenize_chinese_chars else ["北京欢迎你"])


@pytest.mark.parametrize("lowercase", [True, False])
def test_never_split_tokens_stay_whole_with_the_ids_after_mask_in_both_transformers_tokenizers(lowercase, tmp_path):
    tokenizer = trained(lowercase=lowercase, never_split=["[URL]", "<num>"])
    assert [tokenizer.token_to_id(token) for token in ("[MASK]", "[URL]", "<num>")] == [4, 5, 6]
    assert_same_ids(tokenizer, tmp_path, NEVER_SPLIT + ACCENTED)
    tokens = tokenizer.encode("x[URL]y <num>", add_special_tokens=False).tokens
    assert tokens[1] == "[URL]" and tokens[-1] == "<num>"
    other_casing = tokenizer.encode("[url]", add_special_tokens=False).tokens
    assert other_casing[0] == "[" and len(other_casing) > 2  # text, as in transformers
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["never_split"] == config["additional_special_tokens"] == ["[URL]", "<num>"]


def test_the_slow_tokenizer_also_keeps_other_casings_of_a_lower_case_never_split_token_when_lower_casing(tmp_path):
    # transformers' BertTokenizer lower-cases the text before it looks for its special tokens (docs/tokenizer.md).
    tokenizer = trained(never_split=["<num>"])
    fast, slow = transformers_tokenizers(tokenizer, tmp_path)
    assert tokenizer.encode("<NUM>", add_special_tokens=False).tokens == fast.tokenize("<NUM>") == ["<", "num", ">"]
    assert slow.tokenize("<NUM>") == ["<num>"]


def test_words_over_100_characters_become_unk_in_both_transformers_tokenizers(tmp_path):
    tokenizer = trained()
    assert_same_ids(tokenizer, tmp_path, LONG_WORDS)
    assert tokenizer.encode("a" * 100, add_special_tokens=False).tokens != ["[UNK]"]
    assert tokenizer.encode("b" * 101, add_special_tokens=False).tokens == ["[UNK]"]


def test_another_word_length_limit_is_read_by_the_fast_tokenizer_and_set_by_hand_in_the_slow_one(tmp_path):
    tokenizer = trained(max_input_chars_per_word=8)
    assert tokenizer.encode("brownish", add_special_tokens=False).tokens != ["[UNK]"]
    assert tokenizer.encode("beautiful", add_special_tokens=False).tokens == ["[UNK]"]
    fast, slow = transformers_tokenizers(tokenizer, tmp_path)
    texts = ["beautiful brownish", "the " + "a" * 9]
    assert [fast(text)["input_ids"] for text in texts] == [tokenizer.encode(text).ids for text in texts]
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["max_input_chars_per_word"] == 8
    assert slow.wordpiece_tokenizer.max_input_chars_per_word == 100  # transformers' BertTokenizer ignores the file
    slow.wordpiece_tokenizer.max_input_chars_per_word = 8
    assert [slow(text)["input_ids"] for text in texts] == [tokenizer.encode(text).ids for text in texts]


def test_saved_options_come_back_from_tokenizer_json_and_from_vocab_txt(tmp_path):
    options = {"lowercase": True, "strip_accents": False, "tokenize_chinese_chars": False, "never_split": ["[URL]"],
               "max_input_chars_per_word": 12}
    tokenizer = trained(**options)
    save_tokenizer(tokenizer, tmp_path)
    texts = ACCENTED + CJK + NEVER_SPLIT + ["a" * 12 + " " + "a" * 13]
    for path in (tmp_path / "tokenizer.json", tmp_path / "vocab.txt"):
        loaded = load_tokenizer(path)
        assert [loaded.encode(text).ids for text in texts] == [tokenizer.encode(text).ids for text in texts], path


def test_default_options_are_the_tokenizer_of_before():
    default, explicit = trained(), trained(lowercase=True, strip_accents=None, tokenize_chinese_chars=True,
                                           never_split=[], max_input_chars_per_word=100)
    assert default.to_str() == explicit.to_str()
    state = json.loads(default.to_str())
    assert state["normalizer"] == {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                   "strip_accents": None, "lowercase": True}
    assert state["model"]["max_input_chars_per_word"] == 100
    assert [token["content"] for token in state["added_tokens"]] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize("options, message", [
    ({"strip_accents": "yes"}, "tokenizer.strip_accents='yes': expected true, false or null"),
    ({"lowercase": 1}, "tokenizer.lowercase=1: expected true or false"),
    ({"tokenize_chinese_chars": None}, "tokenizer.tokenize_chinese_chars=None: expected true or false"),
    ({"max_input_chars_per_word": 0}, "WordPieceOptions(max_input_chars_per_word=0): must be in [1, inf)"),
    ({"max_input_chars_per_word": 2.5}, "tokenizer.max_input_chars_per_word=2.5: expected a whole number"),
    ({"never_split": "[URL]"}, "WordPieceOptions(never_split='[URL]'): must be a list of tokens, such as ['[URL]']"),
    ({"never_split": ["[URL]", "two words"]}, "WordPieceOptions(never_split=['[URL]', 'two words']): must be a list of "
                                              "tokens, text without spaces such as [URL]; 'two words' is not a token"),
    ({"never_split": [""]}, "WordPieceOptions(never_split=['']): must be a list of tokens, text without spaces such as "
                            "[URL]; '' is not a token"),
    ({"never_split": [["[URL]"]]}, "WordPieceOptions(never_split=[['[URL]']]): must be a list of tokens, text without "
                                   "spaces such as [URL]; ['[URL]'] is not a token"),
])
def test_bad_options_are_one_line_config_errors(options, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)) as error:
        WordPieceOptions(**options)
    assert "\n" not in str(error.value)


def test_repeated_and_bert_special_never_split_tokens_are_kept_once():
    assert WordPieceOptions(never_split=["[URL]", "[MASK]", "[URL]", "<num>"]).never_split == ("[URL]", "<num>")


def test_bad_settings_beside_a_vocab_txt_are_a_checkpoint_error(tmp_path):
    save_tokenizer(trained(), tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"max_input_chars_per_word": -1}))
    with pytest.raises(CheckpointError, match=re.escape("tokenizer_config.json: WordPieceOptions(max_input_chars_per_word=-1): must be in [1, inf)")):
        load_tokenizer(tmp_path / "vocab.txt")


def test_bert_tokenizer_offers_transformers_token_methods_with_the_same_results(tmp_path):
    tokenizer = BertTokenizer(trained(never_split=["[URL]"]))
    tokenizer.save_pretrained(tmp_path)
    reloaded = BertTokenizer.from_pretrained(tmp_path)
    text, pair = "Café [URL] fox zzzz 北京", "the lazy dog"
    tokens = ["fox", "[URL]", "not-a-token", "##a"]
    for reference in (transformers.BertTokenizerFast.from_pretrained(tmp_path),
                      transformers.BertTokenizer.from_pretrained(tmp_path)):
        assert reloaded.tokenize(text) == reference.tokenize(text)
        assert reloaded.tokenize(text, pair, add_special_tokens=True) == reference.convert_ids_to_tokens(
            reference(text, pair)["input_ids"])
        assert reloaded.convert_tokens_to_ids(tokens) == reference.convert_tokens_to_ids(tokens)
        assert reloaded.convert_tokens_to_ids("fox") == reference.convert_tokens_to_ids("fox")
        ids = reference(text)["input_ids"]
        assert reloaded.convert_ids_to_tokens(ids) == reference.convert_ids_to_tokens(ids)
        assert reloaded.convert_ids_to_tokens(ids, skip_special_tokens=True) == reference.convert_ids_to_tokens(
            ids, skip_special_tokens=True)
        assert reloaded.convert_ids_to_tokens(ids[1]) == reference.convert_ids_to_tokens(ids[1])
    assert reloaded.convert_tokens_to_ids("not-a-token") == 1  # [UNK]
    size = reloaded.backend_tokenizer.get_vocab_size()
    with pytest.raises(ValueError, match=f"token id {size} is outside the vocabulary: expected 0 to {size - 1}"):
        reloaded.convert_ids_to_tokens([2, size])
