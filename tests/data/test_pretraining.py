"""Pretraining data (bertlab.data.pretraining): the sequences PretrainingDataModule packs from a corpus (their
length, format and documents, NSP pairs, copied pairs and their validation), seeded and cached, its batches and
orders, its held-out or given validation text, and a corpus it cannot use."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.data import pretraining
from bertlab.data.packing import group_documents
from bertlab.data.pretraining import PretrainingDataModule
from bertlab.errors import DataError
from bertlab.tokenizer import save_tokenizer, special_token_ids


def make_module(source, tmp_path, **options) -> PretrainingDataModule:
    options = {"vocab_size": 600, "max_seq_length": 32, "batch_size": 8, "cache_dir": str(tmp_path / "cache"), **options}
    module = PretrainingDataModule(str(source), **options)
    module.setup("fit")
    return module


def document_of_tokens(tokenizer, ids, alphabets) -> set[int]:
    """Which synthetic documents the non-special, non-punctuation tokens in `ids` come from (none
    for a segment cut down to its final ".")."""
    letters = {token: tokenizer.id_to_token(token).removeprefix("##") for token in set(ids)}
    return {
        next(index for index, alphabet in enumerate(alphabets) if letters[token][0] in alphabet)
        for token in ids
        if letters[token].isalpha()
    }


def split_segments(row) -> tuple[list[int], list[int]]:
    ids, types = list(row["input_ids"]), list(row["token_type_ids"])
    first_sep = types.count(0) - 1
    return ids[1:first_sep], ids[first_sep + 1 : -1]


# --- sequences ---------------------------------------------------------------------------------


def test_sequences_respect_length_format_and_documents(tiny_corpus, tmp_path, corpus_alphabets, caplog):
    with caplog.at_level(logging.INFO, logger="bertlab"):
        module = make_module(tiny_corpus, tmp_path, short_seq_prob=0.2)
    assert "train split" in caplog.text and "6 documents" in caplog.text and "tokens" in caplog.text
    ids = special_token_ids(module.tokenizer)
    for split in ("train", "validation"):
        dataset = module.datasets[split]
        assert len(dataset) > 20
        with_b = identified = 0
        for row in dataset:
            input_ids, types = list(row["input_ids"]), list(row["token_type_ids"])
            assert len(input_ids) <= 32
            assert input_ids[0] == ids["cls"] and input_ids[-1] == ids["sep"]
            assert types == sorted(types), "segment ids must be 0s then 1s"
            tokens_a, tokens_b = split_segments(row)
            assert input_ids[len(tokens_a) + 1] == ids["sep"] and tokens_a
            assert ids["cls"] not in tokens_a + tokens_b and ids["sep"] not in tokens_a + tokens_b
            documents = document_of_tokens(module.tokenizer, tokens_a + tokens_b, corpus_alphabets)
            assert len(documents) <= 1, "a sequence mixes documents"
            identified += len(documents)
            with_b += bool(tokens_b)
        assert with_b > len(dataset) / 2 and identified > 0.9 * len(dataset)
    lengths = [len(row) for row in module.datasets["train"]["input_ids"]]
    assert max(lengths) >= 28 and min(lengths) < 16, "short_seq_prob should make some sequences short"
    # Without NSP, sequences hold the corpus's tokens in order, none lost.
    sentences = [sentence for document in group_documents((tiny_corpus / "train.txt").read_text().split("\n"))
                 for sentence in document]
    corpus_ids = [token for encoding in module.tokenizer.encode_batch(sentences, add_special_tokens=False)
                  for token in encoding.ids]
    packed_ids = [token for row in module.datasets["train"] for token in sum(split_segments(row), [])]
    assert packed_ids == corpus_ids


def test_next_sentence_pairs_are_balanced_and_from_the_right_documents(tiny_corpus, tmp_path, corpus_alphabets):
    module = make_module(tiny_corpus, tmp_path, nsp=True, max_seq_length=24)
    dataset = module.datasets["train"]
    labels = np.asarray(dataset["next_sentence_label"])
    assert len(labels) > 300
    assert labels.mean() == pytest.approx(0.5, abs=0.07)
    identified = 0
    for row in dataset:
        tokens_a, tokens_b = split_segments(row)
        assert tokens_b
        documents_a = document_of_tokens(module.tokenizer, tokens_a, corpus_alphabets)
        documents_b = document_of_tokens(module.tokenizer, tokens_b, corpus_alphabets)
        assert len(documents_a) <= 1 and len(documents_b) <= 1
        if documents_a and documents_b:
            identified += 1
            assert (documents_a == documents_b) == (row["next_sentence_label"] == 0)
    assert identified > 0.9 * len(dataset)


def test_copied_pairs_repeat_segment_a_with_tokens_left_out_in_training_only(tiny_corpus, tmp_path):
    plain = make_module(tiny_corpus, tmp_path / "plain")
    module = make_module(tiny_corpus, tmp_path / "copies", copy_pair_prob=0.5, copy_drop_prob=0.3)
    copies = left_out = kept = 0
    for row in module.datasets["train"]:
        tokens_a, tokens_b = split_segments(row)
        iterator = iter(tokens_a)
        if 2 * len(tokens_b) >= len(tokens_a) and all(token in iterator for token in tokens_b):  # A minus some tokens
            copies += 1
            assert len(tokens_a) <= (32 - 3) // 2
            kept, left_out = kept + len(tokens_b), left_out + len(tokens_a) - len(tokens_b)
    assert 0.35 < copies / len(module.datasets["train"]) < 0.65
    assert 0.2 < left_out / (kept + left_out) < 0.4
    copied, unchanged = ([row.tolist() for row in each.datasets["validation"]["input_ids"]] for each in (module, plain))
    assert copied == unchanged, "validation text stays plain"


def is_copied_pair(row) -> bool:
    """Segment B is segment A with some of its tokens left out, in order."""
    tokens_a, tokens_b = split_segments(row)
    iterator = iter(tokens_a)
    return 2 * len(tokens_b) >= len(tokens_a) and all(token in iterator for token in tokens_b)


def token_stream(tokenizer, text_file: Path) -> str:
    """The text's token ids, sentence after sentence, as ",id,id,…,": a run of ids is in it as a substring."""
    sentences = [sentence for document in group_documents(text_file.read_text().split("\n")) for sentence in document]
    ids = [token for encoding in tokenizer.encode_batch(sentences, add_special_tokens=False) for token in encoding.ids]
    return "," + ",".join(map(str, ids)) + ","


def test_with_copied_pairs_the_validation_text_is_also_packed_as_copied_pairs_disjoint_from_training(
        tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path, copy_pair_prob=1.0)
    assert set(module.datasets) == {"train", "validation", pretraining.TRAINING_STYLE_VALIDATION}
    training_style = module.datasets[pretraining.TRAINING_STYLE_VALIDATION]
    assert len(training_style) > 10 and all(is_copied_pair(row) for row in training_style)
    assert not all(is_copied_pair(row) for row in module.datasets["validation"]), "the plain text stays plain"
    # Segment A of every row is a run of the validation text, and no row of any length is a training row.
    validation_text = token_stream(module.tokenizer, tiny_corpus / "validation.txt")
    segments_a = [split_segments(row)[0] for row in training_style]
    assert all("," + ",".join(map(str, tokens)) + "," in validation_text for tokens in segments_a)
    training_rows = {tuple(row.tolist()) for row in module.datasets["train"]["input_ids"]}
    longer = [tuple(row.tolist()) for row in training_style["input_ids"] if len(row) >= 10]
    assert len(longer) > 10 and training_rows.isdisjoint(longer)

    loaders = module.val_dataloader()
    assert list(loaders) == ["val_text", "val"]
    assert torch.equal(next(iter(loaders["val_text"]))["input_ids"],
                       module.collator([module.datasets["validation"][index] for index in range(8)])["input_ids"])
    assert torch.equal(next(iter(loaders["val"]))["input_ids"],
                       module.collator([training_style[index] for index in range(8)])["input_ids"])

    # Seeded, and read back from the cache by the next run.
    cached = sorted(path.name for path in (tmp_path / "cache").rglob("*"))
    again = make_module(tiny_corpus, tmp_path, copy_pair_prob=1.0)
    assert sorted(path.name for path in (tmp_path / "cache").rglob("*")) == cached
    rebuilt = again.datasets[pretraining.TRAINING_STYLE_VALIDATION]
    assert rebuilt.cache_files == training_style.cache_files
    assert rebuilt.with_format(None)[:] == training_style.with_format(None)[:]


def test_without_copied_pairs_one_plain_validation_loader_as_before(tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path)
    assert set(module.datasets) == {"train", "validation"}
    assert isinstance(module.val_dataloader(), torch.utils.data.DataLoader)


def test_same_seed_same_sequences_and_other_seed_differs(tiny_corpus, tmp_path):
    first = make_module(tiny_corpus, tmp_path / "a", nsp=True, seed=7)
    # WordPiece training is not deterministic (huggingface/tokenizers#1794): reuse its result.
    save_tokenizer(first.tokenizer, tmp_path / "tokenizer")
    again = make_module(tiny_corpus, tmp_path / "b", nsp=True, seed=7, tokenizer_path=str(tmp_path / "tokenizer"))
    other = make_module(tiny_corpus, tmp_path / "c", nsp=True, seed=8, tokenizer_path=str(tmp_path / "tokenizer"))

    def contents(module):
        rows = module.datasets["train"].with_format(None)[:]
        return rows["input_ids"], rows["token_type_ids"], rows["next_sentence_label"]

    assert contents(first) == contents(again)
    assert contents(first) != contents(other)
    # The validation text is packed alike whatever the seed: the plain-text measure scores the same sequences.
    assert first.datasets["validation"].with_format(None)[:] == other.datasets["validation"].with_format(None)[:]


def test_more_processes_give_the_same_sequences(tiny_corpus, tmp_path):
    one = make_module(tiny_corpus, tmp_path / "one", nsp=True, short_seq_prob=0.5)
    save_tokenizer(one.tokenizer, tmp_path / "tokenizer")
    two = make_module(tiny_corpus, tmp_path / "two", nsp=True, short_seq_prob=0.5, num_proc=2,
                      tokenizer_path=str(tmp_path / "tokenizer"))
    assert len(two.datasets["train"].cache_files) == 2, "packed by two processes"
    for split in ("train", "validation"):
        assert one.datasets[split].with_format(None)[:] == two.datasets[split].with_format(None)[:]


def test_second_setup_reuses_the_cache(tiny_corpus, tmp_path):
    first = make_module(tiny_corpus, tmp_path)
    cached = sorted(path.name for path in (tmp_path / "cache").rglob("*"))
    second = make_module(tiny_corpus, tmp_path)
    assert sorted(path.name for path in (tmp_path / "cache").rglob("*")) == cached
    assert second.datasets["train"].cache_files == first.datasets["train"].cache_files
    first.setup("fit")  # idempotent
    assert first.datasets["train"].cache_files == second.datasets["train"].cache_files


def test_token_counts_count_every_training_token(tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path)
    counts = module.token_counts()
    sequences = module.datasets["train"]["input_ids"]
    assert counts.shape == (module.tokenizer.get_vocab_size(),)
    assert counts.sum() == sum(len(row) for row in sequences)
    assert counts[special_token_ids(module.tokenizer)["cls"]] == len(sequences)


def test_a_pass_of_the_training_loader_holds_every_corpus_token_once(tiny_corpus, tmp_path):
    """Plain text as the recipes pack it (short sequences too, batches of unequal rows): the rows one epoch of
    the loader gives, stripped of padding, are the packed rows, each once, and those hold the corpus in order."""
    module = make_module(tiny_corpus, tmp_path, short_seq_prob=0.1)
    packed = [tuple(row) for row in module.datasets["train"]["input_ids"]]
    module.batch_size = next(size for size in range(5, 16) if len(packed) % size)  # a short last batch, to keep
    passed = [tuple(ids[mask.bool()].tolist()) for batch in module.train_dataloader()
              for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]
    assert sorted(passed) == sorted(packed) and passed != packed  # shuffled, none lost or repeated
    sentences = [sentence for document in group_documents((tiny_corpus / "train.txt").read_text().split("\n"))
                 for sentence in document]
    corpus_ids = [token for encoding in module.tokenizer.encode_batch(sentences, add_special_tokens=False)
                  for token in encoding.ids]
    specials = set(special_token_ids(module.tokenizer).values())
    assert [token for row in packed for token in row if token not in specials] == corpus_ids


# --- batches -----------------------------------------------------------------------------------


def test_batches_are_padded_with_masks_and_word_ids(tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path, whole_word_masking=True, nsp=True, short_seq_prob=0.5, batch_size=16)
    tokenizer = module.tokenizer
    ids = special_token_ids(tokenizer)
    batch = next(iter(module.train_dataloader()))
    assert set(batch) == {
        "input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "word_ids", "next_sentence_label"
    }
    lengths = batch["attention_mask"].sum(dim=1)
    assert batch["input_ids"].shape == (16, lengths.max()) and lengths.min() < lengths.max()
    assert batch["special_tokens_mask"].dtype == torch.bool and batch["next_sentence_label"].shape == (16,)
    for row in range(16):
        length = int(lengths[row])
        input_ids = batch["input_ids"][row].tolist()
        assert input_ids[length:] == [ids["pad"]] * (len(input_ids) - length)
        special_positions = batch["special_tokens_mask"][row].nonzero().flatten().tolist()
        sep_positions = [position for position in range(length) if input_ids[position] == ids["sep"]]
        assert special_positions == [0, *sep_positions, *range(length, len(input_ids))]
        word_ids = batch["word_ids"][row].tolist()
        assert all(word_ids[position] == -1 for position in special_positions)
        for position in range(1, length):
            continues = tokenizer.id_to_token(input_ids[position]).startswith("##")
            if word_ids[position] != -1 and word_ids[position - 1] != -1:
                assert (word_ids[position] == word_ids[position - 1]) == continues


def test_pad_to_max_length_gives_every_batch_one_shape(tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path, short_seq_prob=0.5, batch_size=4, pad_to_max_length=True)
    lengths = {batch["input_ids"].shape[1] for loader in (module.train_dataloader(), module.val_dataloader())
               for batch in loader}
    assert lengths == {module.max_seq_length}
    # Training batches also keep one row count: the epoch's short last batch is left out.
    rows = len(module.datasets["train"])
    assert rows % 4 != 0, "the corpus should leave a short batch to drop"
    shapes = [tuple(batch["input_ids"].shape) for batch in module.train_dataloader()]
    assert set(shapes) == {(4, module.max_seq_length)} and len(shapes) == rows // 4


def test_training_order_is_seeded_and_validation_order_fixed(tiny_corpus, tmp_path):
    module = make_module(tiny_corpus, tmp_path, seed=3)

    def first_batch(loader):
        return next(iter(loader))["input_ids"]

    def in_order(split):
        return module.collator([module.datasets[split][index] for index in range(8)])["input_ids"]

    assert torch.equal(first_batch(module.train_dataloader()), first_batch(module.train_dataloader()))
    assert not torch.equal(first_batch(module.train_dataloader()), in_order("train"))
    assert torch.equal(first_batch(module.val_dataloader()), in_order("validation"))


def test_without_validation_split_documents_are_held_out(tmp_path, tiny_corpus):
    module = make_module(tiny_corpus / "train.txt", tmp_path)
    assert set(module.datasets) == {"train", "validation"}
    assert len(module.datasets["validation"]) > 0 and len(module.datasets["train"]) > len(module.datasets["validation"])


def test_validation_source_replaces_the_held_out_documents(tmp_path, tiny_corpus):
    module = make_module(tiny_corpus / "train.txt", tmp_path, validation_source=str(tiny_corpus / "validation.txt"))
    from_folder = make_module(tiny_corpus, tmp_path)
    as_lists = lambda module: [row.tolist() for row in module.datasets["validation"]["input_ids"]]  # noqa: E731
    assert as_lists(module) == as_lists(from_folder)
    assert len(module.datasets["train"]) == len(from_folder.datasets["train"])
    test_only = tmp_path / "test_only"
    test_only.mkdir()
    (test_only / "test.txt").write_text("A test sentence.\n")
    with pytest.raises(DataError, match="data.validation_source .* has no validation split"):
        make_module(tiny_corpus / "train.txt", tmp_path, validation_source=str(test_only))


def test_existing_tokenizer_and_line_limit(tiny_corpus, tmp_path):
    trained = make_module(tiny_corpus, tmp_path / "first")
    tokenizer_dir = tmp_path / "tokenizer"
    save_tokenizer(trained.tokenizer, tokenizer_dir)
    limited = make_module(tiny_corpus, tmp_path / "second", tokenizer_path=str(tokenizer_dir), max_train_lines=40)
    assert limited.tokenizer.get_vocab() == trained.tokenizer.get_vocab()
    assert 0 < len(limited.datasets["train"]) < len(trained.datasets["train"]) / 2


# --- bad inputs --------------------------------------------------------------------------------


def test_corpus_without_text_or_column_is_rejected(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no text in column 'text'"):
        make_module(blank, tmp_path)
    with pytest.raises(DataError, match="no column"):
        make_module(blank, tmp_path, text_column="body")


# --- real data ---------------------------------------------------------------------------------


def test_real_corpus_slice(shared_data_dir, tmp_path):
    module = make_module(
        shared_data_dir / "corpus", tmp_path, vocab_size=2000, max_seq_length=64, max_train_lines=1500,
        max_eval_lines=300, nsp=True, whole_word_masking=True,
    )
    assert module.tokenizer.get_vocab_size() == 2000
    batch = next(iter(module.train_dataloader()))
    assert batch["input_ids"].shape[1] <= 64
    assert (batch["word_ids"] >= 0).sum() > 0
    lengths = [len(row) for row in module.datasets["train"]["input_ids"]]
    assert np.mean(lengths) > 48, "sequences should be mostly full"
    labels = np.asarray(module.datasets["train"]["next_sentence_label"])
    assert 0.4 < labels.mean() < 0.6
