"""Batched sequence-classifier inference (bertlab.inference): a checkpoint without a trained head is refused, rows are
batched longest first, and the logits, probabilities and metrics come back in row order, as a forward pass of each
row alone gives them (the commands that use it: tests/commands/test_predict.py, tests/commands/test_heads.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from bertlab.errors import CheckpointError
from bertlab.inference import (LabelledSplit, classifier_logits, length_sorted_batches, load_classifier,
                               load_labelled_split, predict, split_metrics)
from bertlab.model import BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification
from bertlab.tokenizer import load_tokenizer, special_token_ids
from tests.factories import perturbed, small_config

PAD = 0
LENGTHS = [3, 7, 5, 7, 2, 6, 4]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def classifier(num_labels: int, seed: int = 0) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    return perturbed(BertForSequenceClassification(small_config(num_labels=num_labels)), seed=seed).eval()


def rows_of(lengths: list[int], labels: list | None = None) -> list[dict]:
    """Rows of random ids ([CLS] first, [SEP] last), the second half of each row of token type 1."""
    generator = torch.Generator().manual_seed(1)
    rows = []
    for index, length in enumerate(lengths):
        ids = [2, *torch.randint(5, 100, (length - 2,), generator=generator).tolist(), 3]
        row = {"input_ids": ids, "token_type_ids": [0] * (length // 2) + [1] * (length - length // 2), "index": index}
        if labels is not None:
            row["labels"] = labels[index]
        rows.append(row)
    return rows


@torch.no_grad()
def one_by_one(model, rows: list[dict], head_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The logits of each row in a forward pass of its own: no padding, no batching."""
    return torch.cat([model(torch.tensor([row["input_ids"]]), token_type_ids=torch.tensor([row["token_type_ids"]]),
                            head_mask=head_mask).logits for row in rows])


def pieces(tokenizer, text: str) -> list[int]:
    tokenizer.no_truncation()  # `predict` leaves its own truncation set on the tokenizer
    return tokenizer.encode(text, add_special_tokens=False).ids


# --- loading -----------------------------------------------------------------------------------


def test_load_classifier_gives_the_saved_classifier(tmp_path):
    model = classifier(num_labels=3)
    model.save_pretrained(tmp_path / "model")
    loaded = load_classifier(str(tmp_path / "model"))
    assert isinstance(loaded, BertForSequenceClassification) and loaded.config.num_labels == 3
    expected = model.state_dict()
    assert all(torch.equal(value, expected[key]) for key, value in loaded.state_dict().items())


def test_a_masked_lm_without_a_classifier_head_is_refused(tmp_path):
    BertForMaskedLM(small_config()).save_pretrained(tmp_path / "mlm")
    with pytest.raises(CheckpointError, match=r"mlm: no trained classifier head \(bert\.pooler\.dense\.weight, "
                                              r"bert\.pooler\.dense\.bias, classifier\.weight, classifier\.bias not in "
                                              r"its model\.safetensors\); fine-tune it first"):
        load_classifier(str(tmp_path / "mlm"))


def test_a_token_classifier_is_refused_as_one(tmp_path):
    BertForTokenClassification(small_config(num_labels=3)).save_pretrained(tmp_path / "tagger")
    with pytest.raises(CheckpointError, match=r"tagger: a token classifier \(BertForTokenClassification\), not a "
                                              r"sentence classifier"):
        load_classifier(str(tmp_path / "tagger"))


# --- batches and logits ------------------------------------------------------------------------


def test_batches_come_longest_first_each_padded_to_its_longest_row():
    rows = rows_of(LENGTHS)
    batches = list(length_sorted_batches(rows, LENGTHS, pad_token_id=PAD, batch_size=3))
    # Lengths 7, 7 (rows 1 and 3, in row order), 6, then 5, 4, 3, then 2.
    assert [batch["index"].tolist() for batch in batches] == [[1, 3, 5], [2, 6, 0], [4]]
    for batch in batches:
        assert batch["input_ids"].shape[1] == max(LENGTHS[index] for index in batch["index"])
        for ids, mask, index in zip(batch["input_ids"], batch["attention_mask"], batch["index"]):
            length = LENGTHS[index]
            assert ids[:length].tolist() == rows[index]["input_ids"] and set(ids[length:].tolist()) <= {PAD}
            assert mask.tolist() == [1] * length + [0] * (len(mask) - length)


@pytest.mark.parametrize("masked", [False, True])
def test_logits_are_in_row_order_as_each_rows_own_forward_pass_gives_them(masked):
    model = classifier(num_labels=3)
    rows = rows_of(LENGTHS)
    head_mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]]) if masked else None
    logits = classifier_logits(model, rows, LENGTHS, pad_token_id=PAD, batch_size=3, head_mask=head_mask)
    assert logits.dtype == torch.float32 and logits.shape == (len(rows), 3)
    torch.testing.assert_close(logits, one_by_one(model, rows, head_mask), rtol=1e-4, atol=1e-5)
    if masked:  # the mask reached the model
        assert not torch.allclose(logits, one_by_one(model, rows), atol=1e-3)


# --- predictions -------------------------------------------------------------------------------


def test_predict_gives_the_class_probabilities_of_texts_and_pairs_in_input_order(classifier_dir):
    model, tokenizer = load_classifier(str(classifier_dir)), load_tokenizer(classifier_dir)
    perturbed(model, seed=3)  # weights near their init give probabilities near 1/2 for every text
    texts = ["a good film", "the plot was quite dull and the actors boring", "great", "the story moved me"]
    pairs = ["it was fun", "no", "a really wonderful and moving story", "dull"]
    ids = special_token_ids(tokenizer)
    singles = [{"input_ids": [ids["cls"], *pieces(tokenizer, text), ids["sep"]]} for text in texts]
    for row in singles:
        row["token_type_ids"] = [0] * len(row["input_ids"])
    paired = [{"input_ids": [ids["cls"], *pieces(tokenizer, text), ids["sep"], *pieces(tokenizer, pair), ids["sep"]],
               "token_type_ids": [0] * (len(pieces(tokenizer, text)) + 2) + [1] * (len(pieces(tokenizer, pair)) + 1)}
              for text, pair in zip(texts, pairs)]
    for text_pairs, rows in ((None, singles), (pairs, paired)):
        probabilities = predict(model, tokenizer, texts, text_pairs, batch_size=3)
        expected = one_by_one(model.eval(), rows).softmax(-1)
        torch.testing.assert_close(torch.from_numpy(probabilities), expected, rtol=1e-4, atol=1e-5)


def test_predict_gives_a_regressors_values_as_they_are_and_truncates_long_texts(classifier_dir):
    tokenizer = load_tokenizer(classifier_dir)
    model = classifier(num_labels=1)
    texts = ["the movie was good", "and " * 20 + "the plot was dull"]
    values = predict(model, tokenizer, texts, max_seq_length=8)
    ids = special_token_ids(tokenizer)
    rows = [{"input_ids": [ids["cls"], *pieces(tokenizer, text)[:6], ids["sep"]]} for text in texts]
    for row in rows:
        row["token_type_ids"] = [0] * len(row["input_ids"])
    assert values.shape == (2, 1)
    torch.testing.assert_close(torch.from_numpy(values), one_by_one(model, rows), rtol=1e-4, atol=1e-5)


# --- labelled splits and their metrics ---------------------------------------------------------


def test_a_labelled_split_is_the_files_rows_in_order_in_the_checkpoints_tokens(classifier_dir, tiny_data_dir):
    model = load_classifier(str(classifier_dir))
    data = load_labelled_split(str(classifier_dir), model, str(tiny_data_dir / "sst2"))
    frame = pd.read_parquet(tiny_data_dir / "sst2" / "validation.parquet")
    tokenizer = load_tokenizer(classifier_dir)
    ids = special_token_ids(tokenizer)
    assert data.labels.tolist() == frame["label"].tolist() and data.pad_token_id == ids["pad"]
    assert [row["index"] for row in data.rows] == list(range(len(frame)))
    assert [list(row["input_ids"]) for row in data.rows] == [[ids["cls"], *pieces(tokenizer, text), ids["sep"]]
                                                             for text in frame["sentence"]]
    assert data.lengths.tolist() == [len(row["input_ids"]) for row in data.rows]


def binary_scores(predictions: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Accuracy, F1 of class 1 and Matthews' correlation, by their definitions."""
    tp = float(((predictions == 1) & (labels == 1)).sum())
    tn = float(((predictions == 0) & (labels == 0)).sum())
    fp = float(((predictions == 1) & (labels == 0)).sum())
    fn = float(((predictions == 0) & (labels == 1)).sum())
    mcc = (tp * tn - fp * fn) / ((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)) ** 0.5
    return {"accuracy": (tp + tn) / len(labels), "f1": 2 * tp / (2 * tp + fp + fn), "mcc": mcc}


def split_in_two(model, rows: list[dict], head_mask: torch.Tensor | None) -> None:
    """Moves the classifier's bias so that 3 of the 7 rows are predicted as class 1: the scores of a classifier
    that predicts one class for all would test little."""
    logits = one_by_one(model, rows, head_mask)
    margins = (logits[:, 1] - logits[:, 0]).sort().values
    with torch.no_grad():
        model.classifier.bias[1] -= (margins[3] + margins[4]) / 2


@pytest.mark.parametrize("masked", [False, True])
def test_split_metrics_are_the_loss_and_scores_of_the_rows_logits(masked):
    labels = [0, 1, 1, 0, 1, 0, 1]
    model, rows = classifier(num_labels=2, seed=2), rows_of(LENGTHS, labels)
    head_mask = torch.tensor([[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]]) if masked else None
    split_in_two(model, rows, head_mask)
    data = LabelledSplit(rows=rows, lengths=np.array(LENGTHS), labels=torch.tensor(labels),
                         pad_token_id=PAD)
    metrics = split_metrics(model, data, batch_size=3, head_mask=head_mask)
    logits = one_by_one(model, rows, head_mask)
    predictions = logits.argmax(-1)
    assert int(predictions.sum()) == 3
    expected = {"loss": float(F.cross_entropy(logits, torch.tensor(labels))),
                **binary_scores(predictions, torch.tensor(labels))}
    assert metrics == pytest.approx(expected, abs=1e-5)


@pytest.mark.filterwarnings("ignore:Metric `SpearmanCorrcoef` will save all targets")
def test_a_regressors_split_metrics_are_its_mse_and_correlations():
    labels = [0.5, 2.0, -1.0, 0.0, 1.5, 3.0, -0.5]
    model, rows = classifier(num_labels=1, seed=4), rows_of(LENGTHS, labels)
    data = LabelledSplit(rows=rows, lengths=np.array(LENGTHS), labels=torch.tensor(labels),
                         pad_token_id=PAD)
    metrics = split_metrics(model, data, batch_size=3)
    values, targets = one_by_one(model, rows).squeeze(-1), torch.tensor(labels)
    mse = float(((values - targets) ** 2).mean())
    ranks = [tensor.argsort().argsort().float() for tensor in (values, targets)]
    expected = {"loss": mse, "mse": mse, "pearson": float(torch.corrcoef(torch.stack([values, targets]))[0, 1]),
                "spearman": float(torch.corrcoef(torch.stack(ranks))[0, 1])}
    assert metrics == pytest.approx(expected, abs=1e-4)
