"""BertConfig: validation errors, config.json round trip, Hugging Face config.json files."""

from __future__ import annotations

import json

import pytest

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, ConfigError
from bertlab.value_rules import OneOf, field_annotations, rules
from tests.factories import small_config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(hidden_size=30, num_attention_heads=4),
         r"hidden_size \(30\) must be divisible by num_attention_heads \(4\)"),
        (dict(position_embedding_type="alibi"), r"position_embedding_type 'alibi'.*relative_key_query"),
        (dict(hidden_act="mish"), r"hidden_act 'mish'.*gelu"),
        (dict(attn_implementation="flash"), r"attn_implementation 'flash'.*sdpa, eager"),
        (dict(problem_type="ranking"), r"problem_type 'ranking'.*single_label_classification"),
        (dict(vocab_size=0), r"vocab_size must be a positive integer, got 0"),
        (dict(hidden_size=-32), r"hidden_size must be a positive integer, got -32"),
        (dict(num_hidden_layers=0), r"num_hidden_layers must be a positive integer"),
        (dict(num_attention_heads=0), r"num_attention_heads must be a positive integer"),
        (dict(intermediate_size=0), r"intermediate_size must be a positive integer"),
        (dict(max_position_embeddings=0), r"max_position_embeddings must be a positive integer"),
        (dict(type_vocab_size=-1), r"type_vocab_size must be a positive integer"),
        (dict(num_labels=0), r"num_labels must be a positive integer"),
        (dict(hidden_size=32.0), r"hidden_size must be a positive integer, got 32.0"),
        (dict(num_hidden_layers=True), r"num_hidden_layers must be a positive integer, got True"),
        (dict(hidden_dropout_prob=1.0), r"hidden_dropout_prob must be in \[0, 1\), got 1.0"),
        (dict(attention_probs_dropout_prob=-0.1), r"attention_probs_dropout_prob must be in \[0, 1\)"),
        (dict(classifier_dropout=1.5), r"classifier_dropout must be in \[0, 1\), got 1.5"),
        (dict(initializer_range=0.0), r"initializer_range must be positive, got 0.0"),
        (dict(layer_norm_eps=-1e-12), r"layer_norm_eps must be positive, got -1e-12"),
        (dict(pad_token_id=-1), r"pad_token_id \(-1\) must be in \[0, vocab_size=100\)"),
        (dict(pad_token_id=100), r"pad_token_id \(100\) must be in \[0, vocab_size=100\)"),
        (dict(pruned_heads={2: [0]}), r"pruned_heads \{2: \[0\]\} names a layer or head the model does not have "
                                      r"\(layers 0-1, heads 0-3\)"),
        (dict(pruned_heads={0: [4, 1]}), r"pruned_heads \{0: \[1, 4\]\} names a layer or head"),
        (dict(pruned_heads=[[0, 1]]), r"pruned_heads must map layer indices to lists of head indices"),
    ],
)
def test_invalid_values_raise_config_error_naming_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        small_config(**overrides)


def test_each_field_with_a_rule_refuses_a_value_outside_it_as_a_model_config():
    """The fields' annotations are the rules BertConfig runs (bertlab.value_rules), worded as its config."""
    ruled = {name: rules(annotation) for name, annotation in field_annotations(BertConfig).items() if rules(annotation)}
    assert len(ruled) > 15
    for name, (rule, *_) in ruled.items():
        value = "surely-not-a-choice" if isinstance(rule, OneOf) else -1
        with pytest.raises(ConfigError, match=f"^model config: (unknown )?{name} "):
            small_config(**{name: value})


def test_valid_edge_values_are_accepted():
    config = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0,
                          pad_token_id=99, position_embedding_type="relative_key_query", hidden_act="gelu_new",
                          problem_type="regression", num_labels=1)
    assert config.head_size == 8


def test_id2label_sets_num_labels_and_normalises_key_types():
    config = small_config(id2label={"0": "neg", "1": "neu", "2": "pos"}, label2id={"neg": "0", "neu": 1, "pos": 2})
    assert config.num_labels == 3
    assert config.id2label == {0: "neg", 1: "neu", 2: "pos"}
    assert config.label2id == {"neg": 0, "neu": 1, "pos": 2}


def test_pruned_heads_normalise_json_keys_and_round_trip(tmp_path):
    config = small_config(pruned_heads={"1": [3, 0, 3], "0": []})
    assert config.pruned_heads == {1: [0, 3]}  # int keys, sorted unique heads, layers without heads dropped
    assert json.loads(config.to_json_string())["pruned_heads"] == {"1": [0, 3]}  # JSON keys are strings
    (tmp_path / "config.json").write_text(config.to_json_string())
    assert BertConfig.from_json_file(tmp_path).pruned_heads == {1: [0, 3]}


def test_unknown_constructor_keyword_in_from_dict_is_ignored_but_bad_type_is_config_error():
    assert BertConfig.from_dict({"hidden_size": 32, "num_attention_heads": 4, "foo": 1}).hidden_size == 32
    with pytest.raises(ConfigError, match="hidden_size"):
        BertConfig.from_dict({"hidden_size": "large"})


def test_json_round_trip_keeps_every_weight_property_and_labels(tmp_path):
    config = small_config(position_embedding_type="relative_key", hidden_act="relu", classifier_dropout=0.2,
                          id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1},
                          problem_type="single_label_classification", pad_token_id=3, layer_norm_eps=1e-6)
    path = tmp_path / "config.json"
    path.write_text(config.to_json_string(architecture="BertForSequenceClassification"))
    written = json.loads(path.read_text())
    assert written["model_type"] == "bert"
    assert written["architectures"] == ["BertForSequenceClassification"]
    assert written["id2label"] == {"0": "negative", "1": "positive"}  # JSON keys are strings
    assert written["label2id"] == {"negative": 0, "positive": 1}

    loaded = BertConfig.from_json_file(path)
    assert loaded.id2label == {0: "negative", 1: "positive"}
    assert loaded.num_labels == 2
    expected = config.to_dict()
    expected["architectures"] = ["BertForSequenceClassification"]
    assert loaded.to_dict() == expected
    assert BertConfig.from_json_file(tmp_path) == loaded  # a directory means its config.json


def test_default_labels_are_written_like_hugging_face():
    written = json.loads(small_config(num_labels=3).to_json_string())
    assert written["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    assert written["label2id"] == {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}


def test_runtime_switches_are_not_written_to_config_json():
    config = small_config(gradient_checkpointing=True, attn_implementation="eager", fused_qkv=False)
    written = json.loads(config.to_json_string())
    assert not {"gradient_checkpointing", "attn_implementation", "fused_qkv"} & written.keys()
    assert BertConfig.from_dict(written).attn_implementation == "sdpa"


def test_reads_hugging_face_config_json_with_extra_keys(tmp_path):
    hf_config = {
        "_name_or_path": "some/model", "architectures": ["BertForMaskedLM"], "model_type": "bert",
        "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": 48, "initializer_range": 0.02, "intermediate_size": 96, "layer_norm_eps": 1e-12,
        "max_position_embeddings": 128, "num_attention_heads": 6, "num_hidden_layers": 3,
        "pad_token_id": 0, "position_embedding_type": None, "type_vocab_size": 2, "vocab_size": 500,
        "transformers_version": "4.57.6", "torch_dtype": "float32", "use_cache": True,
        "classifier_dropout": None, "gradient_checkpointing": False, "tie_word_embeddings": True,
        "id2label": {"0": "A", "1": "B", "2": "C"}, "label2id": {"A": 0, "B": 1, "C": 2},
    }
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    config = BertConfig.from_json_file(tmp_path)
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers) == (48, 6, 3)
    assert config.position_embedding_type == "absolute"  # null means the default
    assert config.num_labels == 3 and config.id2label[2] == "C"
    assert config.architectures == ["BertForMaskedLM"]


def test_matches_transformers_bert_config_defaults():
    transformers = pytest.importorskip("transformers")
    reference = json.loads(transformers.BertConfig().to_json_string(use_diff=False))
    ours = json.loads(BertConfig().to_json_string())
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
                "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps",
                "pad_token_id", "position_embedding_type", "classifier_dropout", "id2label", "label2id"):
        assert ours[key] == reference[key], key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"hidden_size": 32,', "malformed JSON"),
        ("[1, 2, 3]", "expected a JSON object, got list"),
        ('{"model_type": "roberta"}', "model_type is 'roberta'; bertlab reads 'bert'"),
        ('{"hidden_size": 30, "num_attention_heads": 4}', "must be divisible"),
        ('{"hidden_size": "big"}', "hidden_size"),
    ],
)
def test_bad_config_json_raises_checkpoint_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as error:
        BertConfig.from_json_file(path)
    assert str(path) in str(error.value)


def test_from_json_file_reads_bertlabs_own_config_json_and_no_other_format(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "modernbert", "hidden_size": 32}))
    with pytest.raises(CheckpointError, match="model_type is 'modernbert'; bertlab reads 'bert' here"):
        BertConfig.from_json_file(tmp_path)


def test_non_utf8_config_json_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match="malformed JSON") as error:
        BertConfig.from_json_file(path)
    assert str(path) in str(error.value)


def test_missing_config_json_names_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such file; a checkpoint directory needs a config.json") as error:
        BertConfig.from_json_file(tmp_path)
    assert str(tmp_path / "config.json") in str(error.value)


def test_label_maps_with_non_integer_ids_are_config_errors():
    with pytest.raises(ConfigError, match="id2label must map integer ids"):
        small_config(id2label={"first": "A"})
    with pytest.raises(ConfigError, match="label2id"):
        small_config(label2id={"A": "zero"})


@pytest.mark.parametrize(("overrides", "message"), [
    (dict(embedding_init="xavier"), r"^model config: unknown embedding_init 'xavier'; expected one of normal, "
                                    r"orthogonal$"),
    (dict(weight_init="xavier"), r"^model config: unknown weight_init 'xavier'; expected one of bert, modernbert$"),
    (dict(tie_word_embeddings="no"), r"^model config: tie_word_embeddings must be true or false, got 'no'$"),
    (dict(output_attentions=1), r"^model config: output_attentions must be true or false, got 1$"),
    (dict(output_hidden_states=None), r"^model config: output_hidden_states must be true or false, got None$"),
])
def test_the_api_fields_refuse_values_they_cannot_mean(overrides, message):
    with pytest.raises(ConfigError, match=message):
        small_config(**overrides)


def test_a_sinusoidal_config_is_written_as_the_absolute_table_and_an_untied_one_says_so():
    written = json.loads(small_config(position_embedding_type="sinusoidal", tie_word_embeddings=False,
                                      output_hidden_states=True).to_json_string())
    assert written["position_embedding_type"] == "absolute" and written["tie_word_embeddings"] is False
    assert "output_hidden_states" not in written  # a choice of the run, as the other runtime switches
    assert small_config(position_embedding_type="sinusoidal").parameter_count() == small_config().parameter_count()
    assert small_config(tie_word_embeddings=False).parameter_count() == small_config().parameter_count() + 100 * 32
