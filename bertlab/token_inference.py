"""Inference with a token classifier — what `predict` and `evaluate` run on one: each word tagged by its first
piece, tags grouped into entities as transformers' "simple" aggregation does, and a labelled split's entity
scores (bertlab.ner_metrics)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from bertlab.checkpoint.dispatch import WEIGHTS_NAME, read_config
from bertlab.data.encoding import truncate_without_padding
from bertlab.data.token_classification import TokenClassificationDataModule, first_pieces
from bertlab.errors import CheckpointError
from bertlab.inference import length_sorted_batches
from bertlab.model import BertForTokenClassification
from bertlab.ner_metrics import OUTSIDE, entity_scores, tag_scheme
from bertlab.tokenizer import special_token_ids

TOKEN_CLASSIFIER = "BertForTokenClassification"


def is_token_classifier(path: str) -> bool:
    """Whether the checkpoint's config.json names a token classifier (BERT's, ModernBERT's or bertlab's); a folder
    without one is not (the sentence path's loader then says what is missing)."""
    if not (Path(path) / "config.json").is_file():
        return False
    return TOKEN_CLASSIFIER in (read_config(Path(path)).architectures or ())


def load_token_classifier(path: str) -> BertForTokenClassification:
    """A fine-tuned token classifier; a sentence classifier, or a checkpoint without trained head weights, is
    refused in one line."""
    if not is_token_classifier(path):
        architectures = read_config(Path(path)).architectures
        raise CheckpointError(f"{path}: not a token classifier (config.json's architectures: {architectures}); "
                              f"tag words with a checkpoint fine-tuned with task=token_classification")
    model = BertForTokenClassification.from_pretrained(path)
    untrained = [key for key in model.load_report.missing if key.startswith(("classifier.", "head."))]
    if untrained:
        raise CheckpointError(f"{path}: no trained token-classifier head ({', '.join(untrained)} not in its "
                              f"{WEIGHTS_NAME})")
    tag_scheme(tag_names(model))
    return model


def tag_names(model: BertForTokenClassification) -> list[str]:
    return [(model.config.id2label or {}).get(i, f"LABEL_{i}") for i in range(model.config.num_labels)]


@torch.inference_mode()
def tag_words(model: BertForTokenClassification, tokenizer, sentences: Sequence[Sequence[str]], *,
              max_seq_length: int = 256, batch_size: int = 64) -> list[list[tuple[str, float]]]:
    """(tag, probability) of each word of each sentence, read at its first piece; the words a truncation to
    `max_seq_length` cut off are tagged O with probability 1."""
    model.eval()
    names = tag_names(model)
    truncate_without_padding(tokenizer, max_seq_length, paired=False)
    encodings = tokenizer.encode_batch([list(words) for words in sentences], is_pretokenized=True)
    rows = [{"input_ids": e.ids, "token_type_ids": e.type_ids, "index": index} for index, e in enumerate(encodings)]
    tagged: list[list[tuple[str, float]]] = [[] for _ in sentences]
    device = next(model.parameters()).device
    for batch in length_sorted_batches(rows, [len(e.ids) for e in encodings], pad_token_id=special_token_ids(tokenizer)["pad"],
                                       batch_size=batch_size):
        inputs = [batch[key].to(device) for key in ("input_ids", "attention_mask", "token_type_ids")]
        probabilities = model(*inputs).logits.float().softmax(-1).cpu()
        for row, index in enumerate(batch["index"].tolist()):
            positions = first_pieces(encodings[index].word_ids)
            scores, ids = probabilities[row, positions].max(-1)
            tagged[index] = [(names[i], float(s)) for i, s in zip(ids.tolist(), scores.tolist())]
            tagged[index] += [(OUTSIDE, 1.0)] * (len(sentences[index]) - len(positions))
    return tagged


def group_entities(words: Sequence[str], spans: Sequence[tuple[int, int]], tags: Sequence[tuple[str, float]],
                   text: str) -> list[dict]:
    """Entities of tagged words, as transformers' "simple" aggregation groups them: a B- tag, or a type unlike
    the previous word's, opens an entity; I- of the same type extends it. Each has its type (entity_group), its
    text and character span, and the mean of its words' probabilities (score)."""
    entities: list[dict] = []
    previous = OUTSIDE
    for (start, end), (tag, score) in zip(spans, tags):
        prefix, kind = tag[:1], tag[2:]
        if tag == OUTSIDE:
            previous = tag
            continue
        if entities and prefix != "B" and previous != OUTSIDE and previous[2:] == kind:
            entity = entities[-1]
            entity["end"], entity["scores"] = end, [*entity["scores"], score]
        else:
            entities.append({"entity_group": kind, "start": start, "end": end, "scores": [score]})
        previous = tag
    return [{"entity_group": e["entity_group"], "word": text[e["start"]:e["end"]], "start": e["start"],
             "end": e["end"], "score": round(float(np.mean(e["scores"])), 6)} for e in entities]


def sentence_entities(model: BertForTokenClassification, tokenizer, texts: Sequence[str], *,
                      max_seq_length: int = 256, batch_size: int = 64) -> list[list[dict]]:
    """The entities of each text: its words are the tokenizer's pre-tokenization (BERT's: whitespace and
    punctuation), kept with their character spans."""
    split = [tokenizer.pre_tokenizer.pre_tokenize_str(text) for text in texts]
    words = [[word for word, _ in pieces] for pieces in split]
    tags = tag_words(model, tokenizer, words, max_seq_length=max_seq_length, batch_size=batch_size)
    return [group_entities(w, [span for _, span in pieces], t, text)
            for w, pieces, t, text in zip(words, split, tags, texts)]


def split_entity_scores(checkpoint: str, model: BertForTokenClassification, data: str, *, split: str = "validation",
                        tokens_column: str = "tokens", tags_column: str = "ner_tags", max_seq_length: int = 256,
                        batch_size: int = 64, scoring: str = "conlleval") -> tuple[dict[str, float], list[dict]]:
    """(entity precision, recall, F1 and word accuracy, the per-type rows) of the classifier on `split` of
    `data`, its tags read with the checkpoint's tag names; every word is scored, a truncated one as O."""
    names = tag_names(model)
    datamodule = TokenClassificationDataModule(data, checkpoint, tokens_column=tokens_column,
                                               tags_column=tags_column, label_names=names, validation_split=split,
                                               max_seq_length=max_seq_length)
    gold = datamodule.gold_tags(split)
    predicted = [[tag for tag, _ in row] for row in tag_words(model, datamodule.tokenizer, datamodule.words(split),
                                                              max_seq_length=max_seq_length, batch_size=batch_size)]
    scores, types = entity_scores(gold, predicted, scoring, tag_scheme(names))
    words = sum(len(row) for row in gold)
    scores["accuracy"] = sum(g == p for a, b in zip(gold, predicted) for g, p in zip(a, b)) / max(words, 1)
    return scores, types
