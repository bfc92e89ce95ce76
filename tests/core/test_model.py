"""The scratch BERT: seeded init, init statistics, gradient checkpointing, sparse MLM, tied decoder."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.core_step_time import activation_bytes, sparse_loss
from bertlab import BertConfig, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification

VOCAB = 200


def small_config(**overrides) -> BertConfig:
    values = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=256, max_position_embeddings=64)
    values.update(overrides)
    return BertConfig(**values)


def mlm_batch(batch: int = 4, length: int = 32, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (batch, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1:, length * 3 // 4:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.full_like(input_ids, -100)
    labelled = (torch.rand(input_ids.shape, generator=generator) < 0.15) & attention_mask.bool()
    labelled[0, 0] = True
    labels[labelled] = input_ids[labelled]
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


# --- initialisation ------------------------------------------------------------------------------


@pytest.mark.parametrize("position_type", ("absolute", "relative_key_query"))
def test_seeded_init_is_bitwise_reproducible(position_type):
    config = small_config(position_embedding_type=position_type)
    states = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        states.append(BertForPreTraining(config).state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][key], states[1][key]) for key in states[0])
    assert not torch.equal(states[0]["bert.encoder.layer.0.attention.self.query.weight"],
                           states[2]["bert.encoder.layer.0.attention.self.query.weight"])


@pytest.mark.parametrize("initializer_range", (0.02, 0.05))
def test_init_statistics(initializer_range):
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(initializer_range=initializer_range,
                                                       position_embedding_type="relative_key"))
    checked = set()
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            weight = module.weight.detach()
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                assert torch.all(weight[module.padding_idx] == 0), name
                weight = torch.cat((weight[:module.padding_idx], weight[module.padding_idx + 1:]))
            assert weight.std().item() == pytest.approx(initializer_range, rel=0.15), name
            assert abs(weight.mean().item()) < initializer_range / 5, name
            if getattr(module, "bias", None) is not None:
                assert torch.all(module.bias == 0), name
            checked.add(type(module))
        elif isinstance(module, nn.LayerNorm):
            assert torch.all(module.weight == 1) and torch.all(module.bias == 0), name
            checked.add(type(module))
    assert checked == {nn.Linear, nn.Embedding, nn.LayerNorm}
    assert model.bert.embeddings.word_embeddings.padding_idx == 0


def test_mlm_bias_starts_at_zero():
    model = BertForPreTraining(small_config())
    assert torch.all(model.cls.predictions.bias == 0)


# --- gradient checkpointing --------------------------------------------------------------------------


def loss_and_grads(model: nn.Module, batch: dict, seed: int):
    model.zero_grad()
    torch.manual_seed(seed)
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize(("dropout", "position_type"),
                         [(0.0, "absolute"), (0.1, "absolute"), (0.1, "relative_key_query")])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(dropout, position_type):
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                                         position_embedding_type=position_type)).train()
    batch = mlm_batch()
    plain_loss, plain_grads = loss_and_grads(model, batch, seed=7)
    model.gradient_checkpointing_enable()
    assert model.bert.encoder.gradient_checkpointing
    checkpointed_loss, checkpointed_grads = loss_and_grads(model, batch, seed=7)
    torch.testing.assert_close(checkpointed_loss, plain_loss, rtol=0, atol=1e-6)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(checkpointed_grads[name], grad, rtol=0, atol=1e-6, msg=name)
    if dropout:  # the equality above is not an accident of dropout being inactive
        _, other_seed_grads = loss_and_grads(model, batch, seed=8)
        assert not torch.allclose(other_seed_grads["bert.embeddings.word_embeddings.weight"],
                                  plain_grads["bert.embeddings.word_embeddings.weight"])


def test_gradient_checkpointing_lowers_activation_memory():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config(num_hidden_layers=3)).train()
    batch = mlm_batch(batch=4, length=48)
    without = activation_bytes(model, sparse_loss, batch)
    model.gradient_checkpointing_enable()
    with_checkpointing = activation_bytes(model, sparse_loss, batch)
    model.gradient_checkpointing_disable()
    assert activation_bytes(model, sparse_loss, batch) == without
    assert with_checkpointing < without / 4, (with_checkpointing, without)


def test_gradient_checkpointing_is_off_in_eval_and_without_grad(monkeypatch):
    model = BertForMaskedLM(small_config(gradient_checkpointing=True))
    calls = []
    monkeypatch.setattr("bertlab.model.checkpoint", lambda *args, **kwargs: calls.append(1))
    model.eval()(**mlm_batch())
    with torch.no_grad():
        model.train()(**mlm_batch())
    assert calls == []


# --- sparse masked-LM prediction ---------------------------------------------------------------------


def test_mlm_logits_are_computed_only_at_labelled_positions():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).eval()
    batch = mlm_batch()
    labels = batch["labels"]
    rows_seen = []
    model.cls.predictions.transform.register_forward_hook(lambda m, args, out: rows_seen.append(args[0].shape))
    with torch.no_grad():
        sparse = model(**batch)
        full = model(batch["input_ids"], batch["attention_mask"])
    selected = labels != -100
    assert rows_seen[0] == (int(selected.sum()), 64)  # the head never saw unlabelled positions
    assert rows_seen[1] == (4, 32, 64)
    assert sparse.logits.shape == (int(selected.sum()), VOCAB)
    assert full.logits.shape == (4, 32, VOCAB)
    torch.testing.assert_close(sparse.logits, full.logits[selected])  # row-major order of labels != -100
    expected = F.cross_entropy(full.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(sparse.loss, expected)


@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_batch_without_labelled_positions_gives_zero_loss_not_nan(model_class):
    model = model_class(small_config()).train()
    batch = mlm_batch()
    batch["labels"] = torch.full_like(batch["labels"], -100)
    out = model(**batch)
    logits = out.logits if model_class is BertForMaskedLM else out.prediction_logits
    loss = out.loss if model_class is BertForMaskedLM else out.mlm_loss
    assert logits.shape == (0, VOCAB)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("model_class", (BertForMaskedLM, BertForPreTraining))
def test_loss_only_forward_gives_the_loss_and_gradients_of_the_logits_path(model_class):
    torch.manual_seed(0)
    model = model_class(small_config()).train()
    batch = mlm_batch()
    results = []
    for return_logits in (True, False):
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks
        out = model(**batch, next_sentence_label=torch.tensor([0, 1, 1, 0]), return_logits=return_logits) \
            if model_class is BertForPreTraining else model(**batch, return_logits=return_logits)
        out.loss.backward()
        logits = out.logits if model_class is BertForMaskedLM else out.prediction_logits
        assert (logits is None) != return_logits
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append((out.loss.detach(), grads))
    (loss, grads), (loss_only, grads_only) = results
    torch.testing.assert_close(loss_only, loss)
    assert grads_only.keys() == grads.keys() == {name for name, _ in model.named_parameters()}
    for name, grad in grads.items():
        torch.testing.assert_close(grads_only[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_pretraining_loss_is_mlm_plus_nsp():
    model = BertForPreTraining(small_config()).eval()
    batch = mlm_batch()
    nsp = torch.tensor([0, 1, 1, 0])
    out = model(**batch, next_sentence_label=nsp)
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)
    torch.testing.assert_close(out.nsp_loss, F.cross_entropy(out.seq_relationship_logits, nsp))
    assert model(**batch).nsp_loss is None
    without_labels = model(batch["input_ids"], batch["attention_mask"])
    assert without_labels.loss is None and without_labels.prediction_logits.shape == (4, 32, VOCAB)


# --- tied decoder ---------------------------------------------------------------------------------------


def test_decoder_is_tied_to_word_embeddings_and_gradients_flow_through_both_uses():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).train()
    names = {name for name, _ in model.named_parameters()}
    assert not any("decoder" in name for name in names)
    assert "cls.predictions.bias" in names
    embeddings = model.bert.embeddings.word_embeddings.weight
    assert model.num_parameters == sum(p.numel() for p in model.parameters())

    batch = mlm_batch()
    unused_token = 3  # never an input id (inputs are >= 5 or padding 0); only the decoder reads its row
    batch["labels"][0, 0] = unused_token
    model(**batch).loss.backward()
    assert embeddings.grad[unused_token].abs().sum() > 0
    assert model.cls.predictions.bias.grad[unused_token] < 0  # a target: descent raises its logit

    with torch.no_grad():
        before = model.eval()(batch["input_ids"]).logits
        embeddings[unused_token] += torch.randn(64)  # not a constant: LayerNorm outputs sum to 0
        after = model(batch["input_ids"]).logits
    changed = (before - after).abs().amax(dim=(0, 1)) > 1e-6
    assert changed.nonzero().flatten().tolist() == [unused_token]  # the decoder reads the live table


def test_multi_label_problem_type_uses_binary_cross_entropy():
    torch.manual_seed(0)
    model = BertForSequenceClassification(small_config(num_labels=3, problem_type="multi_label_classification"))
    batch = mlm_batch()
    targets = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float)
    out = model.eval()(batch["input_ids"], batch["attention_mask"], labels=targets)
    torch.testing.assert_close(out.loss, F.binary_cross_entropy_with_logits(out.logits, targets))


def test_deepcopy_and_dtype_conversion_keep_the_decoder_tied():
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config()).eval()
    input_ids = mlm_batch()["input_ids"]
    clone = copy.deepcopy(model).double()
    with torch.no_grad():
        before = model(input_ids).logits
        clone.bert.embeddings.word_embeddings.weight[3] += torch.randn(64, dtype=torch.float64)  # never an input
        after = clone(input_ids).logits
    assert after.dtype == torch.float64
    assert torch.equal(model(input_ids).logits, before)  # the original is untouched
    changed = (after - before.double()).abs().amax(dim=(0, 1)) > 1e-6
    assert changed.nonzero().flatten().tolist() == [3]


def test_layers_do_not_share_activation_modules():
    model = BertForMaskedLM(small_config(num_hidden_layers=3))
    activations = [layer.intermediate.activation for layer in model.bert.encoder.layer]
    activations.append(model.cls.predictions.transform.activation)
    assert len({id(module) for module in activations}) == 4
