"""One pass of a teacher over texts (bertlab.teacher.inference): every text read once, by the teacher's own
tokenizer, cut to what its positions allow, in batches sorted longest first, in eval mode, without gradients and
under the run's autocast dtype; its logits and [CLS] states land in the rows asked for, equal to a forward of
each text alone; and the record of how the pass went."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer

from bertlab.model import BertForSequenceClassification
from bertlab.teacher.inference import autocast_dtype, for_each_batch, labelling_record, run_teacher
from bertlab.tokenizer import special_token_ids, train_tokenizer
from tests.factories import perturbed, small_config

TEXTS = ["great", "a good movie", "the plot was dull and the actors were boring", "a story that moved me a lot",
         "bad"]
PAIRS = ["yes", "the actors were good", "no", "boring", "a lot"]
LONG = " ".join(TEXTS + PAIRS)  # more tokens than the teacher has positions
CPU = torch.device("cpu")
POSITIONS = 40


@pytest.fixture(scope="module")
def trained_tokenizer() -> Tokenizer:
    return train_tokenizer((TEXTS + PAIRS) * 3, vocab_size=60)


@pytest.fixture
def tokenizer(trained_tokenizer) -> Tokenizer:
    """A copy: a pass sets the truncation of the tokenizer it is given."""
    return Tokenizer.from_str(trained_tokenizer.to_str())


@pytest.fixture
def reference(trained_tokenizer) -> Tokenizer:
    """The same tokenizer, untouched by any pass: how each text reads alone."""
    return Tokenizer.from_str(trained_tokenizer.to_str())


@pytest.fixture
def model(trained_tokenizer) -> BertForSequenceClassification:
    config = small_config(vocab_size=trained_tokenizer.get_vocab_size(), max_position_embeddings=POSITIONS)
    return perturbed(BertForSequenceClassification(config), seed=0).train()  # a pass must switch to eval


@pytest.mark.parametrize("precision, dtype", [
    ("bf16-mixed", torch.bfloat16), ("bf16-true", torch.bfloat16), ("16-mixed", torch.float16),
    ("32-true", None), ("32", None), ("64-true", None),
])
def test_the_autocast_dtype_is_that_of_the_lightning_precision_and_none_for_full_precision(precision, dtype):
    assert autocast_dtype(precision) == dtype


def test_a_labelling_record_gives_the_rate_rounded_and_names_float32_when_no_dtype_is_given():
    assert labelling_record(10, 4.0, CPU, None) == {"sentences": 10, "seconds": 4.0, "sentences_per_sec": 2.5,
                                                    "device": "cpu", "dtype": "float32"}
    # 3 / 0.12345 = 24.30...
    assert labelling_record(3, 0.12345, torch.device("cuda", 1), torch.bfloat16) == {
        "sentences": 3, "seconds": 0.123, "sentences_per_sec": 24.3, "device": "cuda:1", "dtype": "bfloat16"}
    nothing_read = labelling_record(0, 0.0, CPU, torch.float16)
    assert nothing_read["sentences_per_sec"] is None and nothing_read["dtype"] == "float16"
    assert json.loads(json.dumps(nothing_read)) == nothing_read  # what a cache file's metadata holds


def passed(model, tokenizer, texts, pairs=None, **options) -> list[dict]:
    """What each step of a pass saw: its inputs, rows, and the model's mode and grad state then."""
    steps = []

    def step(inputs: list[torch.Tensor], rows: torch.Tensor) -> None:
        ids, mask, types = inputs
        steps.append({"ids": ids, "mask": mask, "types": types, "rows": rows, "training": model.training,
                      "grad": torch.is_grad_enabled()})

    options = {"max_seq_length": 64, "batch_size": 2, "device": CPU, "dtype": None, **options}
    for_each_batch(model, tokenizer, texts, pairs, step, **options)
    return steps


def test_each_text_is_stepped_once_in_batches_longest_first_as_its_tokenizer_reads_it(model, tokenizer, reference):
    steps = passed(model, tokenizer, TEXTS)
    encodings = [reference.encode(text) for text in TEXTS]
    longest_first = sorted(range(len(TEXTS)), key=lambda row: -len(encodings[row].ids))  # ties in their order
    assert [step["rows"].tolist() for step in steps] == [longest_first[:2], longest_first[2:4], longest_first[4:]]
    assert not any(step["training"] or step["grad"] for step in steps)
    pad = special_token_ids(reference)["pad"]
    for step in steps:
        for ids, mask, types, row in zip(step["ids"], step["mask"], step["types"], step["rows"]):
            length = len(encodings[row].ids)
            assert mask.tolist() == [1] * length + [0] * (len(mask) - length)
            assert ids[:length].tolist() == encodings[row].ids and (ids[length:] == pad).all()
            assert not types.any()
    assert not model.training  # left in eval mode


def test_pairs_are_read_as_pairs_with_their_token_types(model, tokenizer, reference):
    steps = passed(model, tokenizer, TEXTS, PAIRS, batch_size=5)
    (step,) = steps
    for ids, mask, types, row in zip(step["ids"], step["mask"], step["types"], step["rows"]):
        encoding = reference.encode(TEXTS[row], PAIRS[row])
        length = len(encoding.ids)
        assert int(mask.sum()) == length and 1 in encoding.type_ids
        assert ids[:length].tolist() == encoding.ids and types[:length].tolist() == encoding.type_ids


@pytest.mark.parametrize("max_seq_length, cut_at", [(512, POSITIONS), (10, 10)],
                         ids=["longer than the positions", "shorter"])
def test_a_text_is_cut_to_max_seq_length_or_the_teachers_positions_whichever_is_fewer(model, tokenizer, reference,
                                                                                     max_seq_length, cut_at):
    whole = reference.encode(LONG).ids
    assert len(whole) > POSITIONS
    steps = passed(model, tokenizer, [LONG, "great"], max_seq_length=max_seq_length)
    ids, mask = steps[0]["ids"][0], steps[0]["mask"][0]
    assert steps[0]["rows"][0] == 0 and ids.shape[0] == cut_at and mask.all()
    assert ids.tolist() == whole[:cut_at - 1] + [special_token_ids(reference)["sep"]]


@pytest.mark.parametrize("dtype, computed_in", [(torch.bfloat16, torch.bfloat16), (None, torch.float32)])
def test_the_steps_run_under_autocast_to_the_dtype_given_and_in_float32_without_one(model, tokenizer, dtype,
                                                                                   computed_in):
    dtypes = []

    def step(inputs, rows):
        dtypes.append(torch.nn.functional.linear(torch.ones(1, 4), torch.ones(2, 4)).dtype)

    for_each_batch(model, tokenizer, TEXTS, None, step, max_seq_length=32, batch_size=4, device=CPU, dtype=dtype)
    assert dtypes == [computed_in, computed_in]
    assert torch.nn.functional.linear(torch.ones(1, 4), torch.ones(2, 4)).dtype == torch.float32  # only inside


def alone(model, reference, text, pair=None, layers=()) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The logits of one text (no padding, no batch neighbours) and its [CLS] state after each of `layers`, read
    by hooks on the encoder's layers."""
    encoding = reference.encode(text, pair)
    states = {}
    hooks = [model.bert.encoder.layer[layer - 1].register_forward_hook(
        lambda module, inputs, output, layer=layer: states.__setitem__(layer, output[0][0, 0])) for layer in layers]
    with torch.no_grad():
        logits = model.eval()(torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids])).logits
    for hook in hooks:
        hook.remove()
    return logits[0], [states[layer] for layer in layers]


def test_logits_and_cls_states_land_in_the_rows_given_and_equal_a_forward_of_each_text_alone(model, tokenizer,
                                                                                            reference):
    rows = torch.tensor([6, 0, 3, 1, 4])  # texts[i] goes to row rows[i]; rows 2 and 5 are someone else's
    logits = torch.full((7, 2), float("nan"))
    hidden = torch.full((7, 2, 32), float("nan"), dtype=torch.float16)
    run_teacher(model, tokenizer, TEXTS, None, [2, 1], logits, hidden, rows, max_seq_length=32, batch_size=2,
                device=CPU, dtype=None)
    assert logits[[2, 5]].isnan().all() and hidden[[2, 5]].isnan().all()
    for text, row in zip(TEXTS, rows):
        expected_logits, (after_2, after_1) = alone(model, reference, text, layers=(2, 1))
        torch.testing.assert_close(logits[row], expected_logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(hidden[row], torch.stack([after_2, after_1]).half(), rtol=1e-3, atol=1e-3)


def test_without_layers_only_the_logits_are_written_and_pairs_are_read_as_pairs(model, tokenizer, reference):
    logits = torch.full((len(TEXTS), 2), float("nan"))
    run_teacher(model, tokenizer, TEXTS, PAIRS, [], logits, None, torch.arange(len(TEXTS)), max_seq_length=32,
                batch_size=3, device=CPU, dtype=None)
    for row, (text, pair) in enumerate(zip(TEXTS, PAIRS)):
        torch.testing.assert_close(logits[row], alone(model, reference, text, pair)[0], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(logits[row], alone(model, reference, text)[0], rtol=1e-3, atol=1e-3)
