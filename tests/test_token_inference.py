"""Token-classifier inference (bertlab.token_inference): words tagged at their first piece, entities grouped as
transformers' "simple" aggregation groups them, and transformers' own pipeline on a bertlab export."""

from __future__ import annotations

import pytest
import torch

from bertlab.checkpoint.dispatch import export_pretrained
from bertlab.errors import CheckpointError
from bertlab.model import BertForSequenceClassification, BertForTokenClassification
from bertlab.token_inference import group_entities, load_token_classifier, sentence_entities
from bertlab.tokenizer import load_tokenizer, train_tokenizer
from tests.factories import small_config

TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
TEXTS = ["anna smith visited paris and rome", "the city of oslo", "nothing here"]


def test_entities_group_as_transformers_simple_aggregation():
    text = "Anna Smith met Bo in Rome"
    spans = [(0, 4), (5, 10), (11, 14), (15, 17), (18, 20), (21, 25)]
    tags = [("B-PER", .9), ("I-PER", .7), ("O", 1.), ("I-PER", .6), ("O", 1.), ("B-LOC", .8)]
    assert group_entities(text.split(), spans, tags, text) == [
        {"entity_group": "PER", "word": "Anna Smith", "start": 0, "end": 10, "score": 0.8},
        {"entity_group": "PER", "word": "Bo", "start": 15, "end": 17, "score": 0.6},  # I- after O opens one
        {"entity_group": "LOC", "word": "Rome", "start": 21, "end": 25, "score": 0.8}]


@pytest.fixture(scope="module")
def tagger_dir(tmp_path_factory):
    """A token classifier set by hand: names tag as persons, cities as places, the rest as O."""
    tokenizer = train_tokenizer(TEXTS * 3, vocab_size=80, min_frequency=1)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2,
                          id2label=TAGS, label2id={v: k for k, v in TAGS.items()}, hidden_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForTokenClassification(config).eval()
    vocabulary = tokenizer.get_vocab()
    with torch.no_grad():
        for layer in model.bert.encoder.layer:  # the encoder adds nothing: the embedding of the word decides
            layer.attention.output.dense.weight.zero_()
            layer.attention.output.dense.bias.zero_()
            layer.output.dense.weight.zero_()
            layer.output.dense.bias.zero_()
        model.bert.embeddings.position_embeddings.weight.zero_()
        model.bert.embeddings.token_type_embeddings.weight.zero_()
        words = model.bert.embeddings.word_embeddings.weight
        words.zero_()
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([1.0, 0, 0, 0, 0]))
        for feature, (names, tag) in enumerate(((("anna",), 1), (("smith",), 2), (("paris", "rome", "oslo"), 3))):
            for name in names:
                words[vocabulary[name], feature] = 1.0
            model.classifier.weight[tag, feature] = 40.0  # large after the LayerNorm's scaling
    directory = tmp_path_factory.mktemp("tagger") / "hf_model"
    export_pretrained(model, tokenizer, directory)
    return directory


def test_predict_finds_the_entities_of_a_sentence(tagger_dir):
    model = load_token_classifier(str(tagger_dir))
    found = sentence_entities(model, load_tokenizer(str(tagger_dir)), TEXTS)
    assert [[(e["entity_group"], e["word"]) for e in entities] for entities in found] == [
        [("PER", "anna smith"), ("LOC", "paris"), ("LOC", "rome")], [("LOC", "oslo")], []]


def test_transformers_pipeline_on_the_export_finds_the_same_entities(tagger_dir):
    transformers = pytest.importorskip("transformers")
    tagger = transformers.pipeline("token-classification", model=str(tagger_dir), aggregation_strategy="simple",
                                   device="cpu")
    model = load_token_classifier(str(tagger_dir))
    ours = sentence_entities(model, load_tokenizer(str(tagger_dir)), TEXTS)
    for text, entities in zip(TEXTS, ours):
        theirs = tagger(text)
        assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in theirs] == \
            [(e["entity_group"], e["word"], e["start"], e["end"]) for e in entities]
        assert [float(e["score"]) for e in theirs] == pytest.approx([e["score"] for e in entities], abs=1e-5)


def test_a_sentence_classifier_is_refused_as_a_tagger(tmp_path):
    config = small_config(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=16)
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="not a token classifier"):
        load_token_classifier(str(tmp_path))
