"""The transfer set's texts: built once, cached by what they depend on."""

from __future__ import annotations

from bertlab.data.augment import joined
from bertlab.data.transfer_set import TransferSettings, cache_key, transfer_examples
from tests.data.test_augment import distinct_words


def test_joined_texts_follow_the_augmented_copies_and_are_cached(tmp_path, caplog):
    examples = distinct_words(20, 5)
    settings = TransferSettings(copies=1, joined=7)
    made = transfer_examples(examples, settings, ["sentence"], cache_dir=tmp_path)
    augmented = transfer_examples(examples, TransferSettings(copies=1), ["sentence"], cache_dir=tmp_path)
    assert made[:-7] == augmented and made[-7:] == joined(examples, 7, seed=0)
    caplog.set_level("INFO", logger="bertlab")
    assert transfer_examples(examples, settings, ["sentence"], cache_dir=tmp_path) == made
    assert "Transfer set loaded from" in caplog.text
    assert cache_key(examples, settings, ["sentence"]) != cache_key(examples, TransferSettings(copies=1), ["sentence"])
