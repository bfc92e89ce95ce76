"""The transfer set's texts: augmented copies (masking, masked-LM replacement, n-grams) and unlabelled text."""

from __future__ import annotations

import logging
import math
import random
import re

import datasets
import pytest
import torch

from bertlab.data.augment import CONNECTIVES, MASK, MaskedLM, augment, joined, read_unlabelled
from bertlab.errors import CheckpointError, ConfigError, DataError
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.tokenizer import save_tokenizer, special_token_ids, train_tokenizer
from tests.factories import small_config

torch.set_num_threads(2)

WORDS = "the a good bad movie film plot actor story great awful fun dull long scene music ending".split()
RARE_WORDS = ["misfiring", "filmgoers"]  # not in the tokenizer's training text: several WordPieces each


def make_sentences(count: int, seed: int, length: tuple[int, int] = (4, 14)) -> list[str]:
    """Words of WORDS (one WordPiece each), then a rare word and a full stop."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(*length)) + [rng.choice(RARE_WORDS), "."])
            for _ in range(count)]


def distinct_words(count: int, length: int) -> list[tuple[str]]:
    """Sentences whose words all differ (w0_1 …), so that a word's place in a copy tells where it came from."""
    return [(" ".join(f"w{sentence}_{word}" for word in range(length)),) for sentence in range(count)]


@pytest.fixture(scope="module")
def masked_lm() -> MaskedLM:
    """A freshly initialised tiny BertForMaskedLM: random, but its predictions can be computed directly."""
    texts = [" ".join(random.Random(seed).choices(WORDS, k=10)) + " ." for seed in range(300)]
    tokenizer = train_tokenizer(texts, vocab_size=100, min_frequency=1)
    torch.manual_seed(0)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2)
    return MaskedLM(BertForMaskedLM(config), tokenizer, top_k=3)


def expected_top_k(masked_lm: MaskedLM, words: list[str], position: int) -> list[str]:
    """The model's top-k whole words for `words[position]` masked, computed without the module's code path."""
    tokenizer, ids = masked_lm.tokenizer, special_token_ids(masked_lm.tokenizer)
    texts = [" ".join(words[:position]), " ".join(words[position + 1:])]
    before, after = (tokenizer.encode(text, add_special_tokens=False).ids if text else [] for text in texts)
    input_ids = torch.tensor([[ids["cls"], *before, ids["mask"], *after, ids["sep"]]])
    with torch.no_grad():
        logits = masked_lm.model(input_ids).logits[0, len(before) + 1]
    ranked = [tokenizer.id_to_token(index) for index in logits.argsort(descending=True).tolist()]
    allowed = [token for token in ranked if token != words[position] and token.isalnum() and not token.startswith("[")]
    return allowed[:masked_lm.top_k]


def test_the_same_seed_gives_the_same_copies_and_another_seed_other_ones(masked_lm):
    examples = [(sentence,) for sentence in make_sentences(30, seed=1)]
    first = augment(examples, 4, seed=0, masked_lm=masked_lm)
    assert first == augment(examples, 4, seed=0, masked_lm=masked_lm)
    assert first != augment(examples, 4, seed=1, masked_lm=masked_lm)
    assert 30 * 3 < len(first) <= 30 * 4 and all(len(copy) == 1 for copy in first)


def test_sentence_pairs_keep_both_texts_each_augmented_on_its_own():
    texts = [text for (text,) in distinct_words(80, 8)]
    pairs = list(zip(texts[::2], texts[1::2]))
    copies = augment(pairs, 5, seed=0, p_ngram=0.0)
    assert len(copies) > 150 and all(len(copy) == 2 for copy in copies)
    for first, second in copies:  # sentences 2k and 2k + 1, each word w<sentence>_<place> in its place or [MASK]
        (sentence,) = {word.split("_")[0] for word in first.split() if word != MASK}
        for text, source in ((first, int(sentence[1:])), (second, int(sentence[1:]) + 1)):
            assert all(word in (MASK, f"w{source}_{place}") for place, word in enumerate(text.split()))
        assert int(sentence[1:]) % 2 == 0
    changed = [tuple(MASK in text for text in copy) for copy in copies]
    assert (True, False) in changed and (False, True) in changed and (True, True) in changed


def test_no_augmentation_gives_no_copies_since_every_copy_is_a_duplicate(masked_lm):
    examples = [(sentence,) for sentence in make_sentences(10, seed=2)] + [("an  extra   space", "and a pair")]
    assert augment(examples, 3, seed=0, masked_lm=masked_lm, p_mask=0.0, p_replace=0.0, p_ngram=0.0) == []
    assert augment(examples, 0, seed=0, masked_lm=masked_lm) == []


def test_copies_of_an_example_are_distinct_from_it_and_from_each_other():
    examples = [("good film",), ("a", "b")]
    copies = augment(examples, 400, seed=0, p_mask=0.5, p_ngram=0.5)
    assert len(copies) == len(set(copies)) and not set(examples) & set(copies)
    assert set(copies) == {("[MASK] film",), ("good [MASK]",), ("[MASK] [MASK]",), ("good",), ("film",), ("[MASK]",),
                           ("[MASK]", "b"), ("a", "[MASK]"), ("[MASK]", "[MASK]")}


def test_the_mask_rate_is_close_to_p_mask():
    # 100,000 words: the rate's standard deviation is 0.001, so 0.005 is five of them. Copies without
    # any mask (0.9^50 of them) are dropped as duplicates, which raises the rate by 0.0005 at most.
    copies = augment(distinct_words(200, 50), 10, seed=0, p_mask=0.1, p_replace=0.0, p_ngram=0.0)
    words = [word for (text,) in copies for word in text.split()]
    assert len(copies) >= 1990
    assert abs(words.count(MASK) / len(words) - 0.1) < 0.005


def test_the_replacement_rate_is_close_to_p_replace(masked_lm):
    # 36,000 words a masked LM can replace: the rate's standard deviation is 0.0021, so 0.01 is almost
    # five of them. Copies that replace nothing (0.8^30 of them) are dropped: +0.0002 at most.
    # Each sentence ends in "x<its number>", an unknown word to the tokenizer: never replaced.
    sentences = [f"{text} x{number}" for number, text in enumerate(make_sentences(300, seed=7, length=(30, 30)))]
    copies = augment([(text,) for text in sentences], 4, seed=0, masked_lm=masked_lm, p_mask=0.0, p_replace=0.2,
                     p_ngram=0.0)
    changed = [new != old for (copy,) in copies
               for new, old in zip(copy.split()[:30], sentences[int(copy.split()[-1][1:])].split())]
    assert len(copies) > 1190 and abs(sum(changed) / len(changed) - 0.2) < 0.01


def test_ngram_copies_are_runs_of_at_most_five_consecutive_words_of_an_augmented_copy():
    examples = distinct_words(50, 12)
    copies = augment(examples, 8, seed=0, p_mask=0.3, p_replace=0.0, p_ngram=1.0)
    assert {len(text.split()) for (text,) in copies} == {1, 2, 3, 4, 5}
    for (text,) in copies:
        words = text.split()
        known = [word for word in words if word != MASK]
        if not known:
            continue
        sentence, place = (int(part) for part in known[0][1:].split("_"))
        start = place - words.index(known[0])
        assert all(word in (MASK, f"w{sentence}_{start + offset}") for offset, word in enumerate(words))
        assert 0 <= start and start + len(words) <= 12


def test_a_share_p_ngram_of_the_copies_is_cut_to_ngrams():
    # Half the words masked: no full copy is a duplicate. Of 2,000 copies the share's standard
    # deviation is 0.01: 0.05 is five of them.
    copies = augment(distinct_words(500, 12), 4, seed=0, p_mask=0.5, p_replace=0.0, p_ngram=0.25)
    share = sum(len(text.split()) <= 5 for (text,) in copies) / len(copies)
    assert len(copies) > 1950 and abs(share - 0.25) < 0.05


def test_replacement_puts_one_of_the_masked_lms_top_k_words_in_place(masked_lm):
    chosen = set()
    for text in make_sentences(6, seed=3):
        original = text.split()
        copies = augment([(text,)], 6, seed=0, masked_lm=masked_lm, p_mask=0.0, p_replace=1.0, p_ngram=0.0)
        assert len(copies) >= 3
        expected = [expected_top_k(masked_lm, original, position) for position in range(len(original))]
        for (copy,) in copies:
            for position, (word, new) in enumerate(zip(original, copy.split(), strict=True)):
                if word in RARE_WORDS or word == ".":  # several WordPieces, punctuation: kept
                    assert new == word
                else:
                    assert new in expected[position]
                    chosen.add((text, position, new))
    assert len(chosen) > len({key[:2] for key in chosen})  # drawn among the top k, not always the best


def test_a_long_text_is_read_in_a_window_around_the_masked_word(masked_lm):
    words = random.Random(4).choices(WORDS, k=80)  # one WordPiece each: the window counts words
    narrow = MaskedLM(masked_lm.model, masked_lm.tokenizer, top_k=3, max_seq_length=16)
    predictions = narrow.predict([words, words, words], [0, 40, 79])
    assert predictions[0] == expected_top_k(masked_lm, words[:14], 0)
    assert predictions[1] == expected_top_k(masked_lm, words[34:48], 6)
    assert predictions[2] == expected_top_k(masked_lm, words[66:80], 13)


def test_without_a_masked_lm_replacement_is_off_and_the_log_says_so(masked_lm, caplog):
    # Half the words masked: no copy repeats another or its example, with or without a masked LM.
    examples = [(sentence,) for sentence in make_sentences(20, seed=5, length=(30, 30))]
    settings = {"p_mask": 0.5, "p_replace": 0.3, "p_ngram": 0.0}
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        plain = augment(examples, 4, seed=0, **settings)
    assert "word replacement is off" in caplog.text
    replaced = augment(examples, 4, seed=0, masked_lm=masked_lm, **settings)
    assert len(plain) == len(replaced) == 80 and plain != replaced
    for (original,), (text,), (other,) in zip([example for example in examples for _ in range(4)], plain, replaced):
        assert all(word in (MASK, kept) for word, kept in zip(text.split(), original.split(), strict=True))
        assert [word == MASK for word in text.split()] == [word == MASK for word in other.split()]  # the same draws


def test_a_masked_lm_folder_is_read_by_path_and_a_classifier_is_refused(masked_lm, tmp_path):
    masked_lm.model.save_pretrained(tmp_path / "mlm")
    save_tokenizer(masked_lm.tokenizer, tmp_path / "mlm")
    examples = [(sentence,) for sentence in make_sentences(10, seed=6)]
    loaded = MaskedLM.from_pretrained(tmp_path / "mlm", top_k=3)
    assert augment(examples, 3, seed=0, masked_lm=loaded) == augment(examples, 3, seed=0, masked_lm=masked_lm)
    assert augment(examples, 3, seed=0, masked_lm=str(tmp_path / "mlm")) != []
    BertForSequenceClassification(masked_lm.model.config).save_pretrained(tmp_path / "classifier")
    save_tokenizer(masked_lm.tokenizer, tmp_path / "classifier")
    with pytest.raises(CheckpointError, match="no trained masked-LM head") as error:
        MaskedLM.from_pretrained(tmp_path / "classifier")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("settings, message", [
    ({"p_mask": -0.1}, r"augment\(p_mask=-0.1\): must be in \[0, 1\]"),
    ({"p_replace": 1.5}, r"augment\(p_replace=1.5\): must be in \[0, 1\]"),
    ({"p_ngram": math.nan}, r"augment\(p_ngram=nan\): must be in \[0, 1\]"),
    ({"p_mask": 0.6, "p_replace": 0.6}, "p_mask \\+ p_replace must be at most 1"),
    ({"max_ngram": 0}, r"augment\(max_ngram=0\): must be in \[1, inf\)"),
    ({"copies": -1}, r"augment\(copies=-1\): must be in \[0, inf\)"),
    ({"p_mask": None}, r"^augment\(p_mask=None\): must be a number in \[0, 1\]$"),
    ({"p_ngram": None}, r"^augment\(p_ngram=None\): must be a number in \[0, 1\]$"),
    ({"max_ngram": None}, r"^augment\(max_ngram=None\): must be a whole number in \[1, inf\)$"),
    ({"copies": None}, r"^augment\(copies=None\): must be a whole number in \[0, inf\)$"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    arguments = {"copies": 2, **settings}
    with pytest.raises(ConfigError, match=message) as error:
        augment([("a film",)], arguments.pop("copies"), seed=0, **arguments)
    assert "\n" not in str(error.value)


def test_an_example_that_is_not_one_or_two_texts_is_a_one_line_error():
    with pytest.raises(DataError, match="example 1 is 'a film'; expected a tuple of 1 or 2 texts"):
        augment([("fine",), "a film"], 2, seed=0)


def test_joined_texts_are_two_training_texts_of_3_to_20_words_around_a_connective():
    examples = distinct_words(50, 4) + distinct_words(10, 2) + distinct_words(10, 21)  # only the first 50 can join
    eligible = {example[0] for example in examples[:50]}
    made = joined(examples, 300, seed=0)
    assert len(made) == len(set(made)) == 300 and joined(examples, 300, seed=0) == made != joined(examples, 300, seed=1)
    for (text,) in made:
        first, connective, second = next((text.partition(connective) for connective in CONNECTIVES
                                          if connective in text))
        assert first in eligible and second in eligible and first != second, text
    assert joined(examples, 0, seed=0) == []


def test_joining_sentence_pairs_or_too_few_texts_is_a_one_line_error():
    with pytest.raises(ConfigError, match="joins single texts; this task's examples are sentence pairs"):
        joined([("a b c", "d e f")] * 3, 5, seed=0)
    with pytest.raises(DataError, match="needs two training texts of 3 to 20 words; found 1"):
        joined([("a b c",), ("d",)], 5, seed=0)


def test_unlabelled_text_is_read_from_lines_or_tab_separated_pairs(tmp_path):
    (tmp_path / "single.txt").write_text("a fine film\n\nthe plot , dull\n", encoding="utf-8")
    assert read_unlabelled(tmp_path / "single.txt") == [("a fine film",), ("the plot , dull",)]
    (tmp_path / "pairs.tsv").write_text("a film\tthe film\nthe plot\ta story\n", encoding="utf-8")
    assert read_unlabelled(tmp_path / "pairs.tsv", ["sentence1", "sentence2"]) == [
        ("a film", "the film"), ("the plot", "a story")]
    with pytest.raises(DataError, match=r"single.txt, line 1: 1 tab-separated text\(s\), expected 2"):
        read_unlabelled(tmp_path / "single.txt", ["sentence1", "sentence2"])


def test_unlabelled_text_is_read_from_a_dataset_file_or_folder(tmp_path):
    columns = {"sentence1": ["a film", "the plot"], "sentence2": ["the film", "a story"], "label": [-1, -1]}
    datasets.Dataset.from_dict(columns).to_parquet(tmp_path / "unlabelled.parquet")
    assert read_unlabelled(tmp_path / "unlabelled.parquet", ["sentence1", "sentence2"]) == [
        ("a film", "the film"), ("the plot", "a story")]
    (tmp_path / "folder").mkdir()
    datasets.Dataset.from_dict(columns).to_parquet(tmp_path / "folder" / "test.parquet")
    assert read_unlabelled(tmp_path / "folder", "sentence2", split="test") == [("the film",), ("a story",)]


@pytest.mark.parametrize("name, columns, message", [
    ("missing.txt", ["sentence"], "unlabelled text file .*missing.txt does not exist"),
    ("missing.parquet", ["sentence"], "unlabelled text .*missing.parquet' does not exist"),
    ("unlabelled.parquet", ["sentence"], r"has no column\(s\) \['sentence'\]; available columns"),
    ("unlabelled.parquet", ["text", "sentence1", "sentence2"],
     re.escape("read_unlabelled(text_columns=['text', 'sentence1', 'sentence2']): must be 1 or 2 column names (a "
               "text, or a sentence pair)")),
])
def test_a_missing_file_or_column_is_a_one_line_error(tmp_path, name, columns, message):
    datasets.Dataset.from_dict({"text": ["a film"], "idx": [0]}).to_parquet(tmp_path / "unlabelled.parquet")
    with pytest.raises((DataError, ConfigError), match=message) as error:
        read_unlabelled(tmp_path / name, columns)
    assert "\n" not in str(error.value)
