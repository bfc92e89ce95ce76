"""bertlab's models leave PyTorch as transformers' do: torch.export and the ONNX exporter take them with
their outputs (pytree nodes, as transformers' ModelOutput), and the exported program and onnxruntime
compute what the eager model does."""

from __future__ import annotations

import pytest
import torch

import bertlab
from tests.factories import perturbed
from tests.test_model_parity import padded_pair_batch, small_config

CLASSES = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification", "BertForPreTraining")
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def model_and_inputs(class_name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = getattr(bertlab, class_name)(small_config(position_embedding_type="absolute")).eval()
    perturbed(model, seed=1)
    batch = padded_pair_batch(seed=2)
    return model, tuple(batch[name] for name in INPUT_NAMES)


@pytest.mark.parametrize("class_name", CLASSES)
def test_torch_export_returns_the_eager_outputs(class_name):
    model, inputs = model_and_inputs(class_name)
    exported = torch.export.export(model, inputs).module()(*inputs)
    eager = model(*inputs)
    assert type(exported) is type(eager) and exported.keys() == eager.keys()
    for key in eager.keys():
        torch.testing.assert_close(exported[key], eager[key], atol=1e-5, rtol=0, msg=key)


@pytest.mark.slow
@pytest.mark.parametrize("class_name", CLASSES)
def test_onnx_export_runs_in_onnxruntime_as_in_torch(class_name, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    model, inputs = model_and_inputs(class_name)
    torch.onnx.export(model, inputs, tmp_path / "model.onnx", dynamo=True, input_names=list(INPUT_NAMES))
    session = onnxruntime.InferenceSession(tmp_path / "model.onnx")
    outputs = session.run(None, {name: tensor.numpy() for name, tensor in zip(INPUT_NAMES, inputs)})
    eager = model(*inputs).to_tuple()
    assert len(outputs) == len(eager)
    for ours, theirs in zip(eager, outputs):
        torch.testing.assert_close(torch.from_numpy(theirs), ours, atol=1e-4, rtol=0)


class TupleOutputs(torch.nn.Module):
    """docs/model_api.md's wrapper for torch.onnx's TorchScript exporter, which takes tuples only as outputs."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return self.model(*inputs).to_tuple()


@pytest.mark.slow
def test_the_torchscript_onnx_exporter_takes_a_model_wrapped_to_return_tuples(tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    model, inputs = model_and_inputs("BertForSequenceClassification")
    torch.onnx.export(TupleOutputs(model).eval(), inputs, tmp_path / "model.onnx", dynamo=False,
                      input_names=list(INPUT_NAMES), output_names=["logits"])
    assert not model.training  # the exporter puts every module back in the wrapper's mode
    session = onnxruntime.InferenceSession(tmp_path / "model.onnx")
    logits, = session.run(None, {name: tensor.numpy() for name, tensor in zip(INPUT_NAMES, inputs)})
    torch.testing.assert_close(torch.from_numpy(logits), model(*inputs).logits, atol=1e-5, rtol=0)


def test_every_argument_can_be_passed_by_position():
    """torch.onnx's TorchScript exporter (dynamo=False) passes a forward's arguments by position, defaults too."""
    model, inputs = model_and_inputs("BertForSequenceClassification")
    embeds = model.bert.embeddings.word_embeddings(inputs[0])
    arguments = list(model.forward.__code__.co_varnames[1:model.forward.__code__.co_argcount])
    positional = [None] * len(arguments)
    positional[arguments.index("attention_mask")] = inputs[1]
    positional[arguments.index("token_type_ids")] = inputs[2]
    positional[arguments.index("inputs_embeds")] = embeds
    torch.testing.assert_close(model(*positional).logits, model(*inputs).logits, atol=1e-5, rtol=0)
