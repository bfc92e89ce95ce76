"""A teacher's states inside a layer (bertlab.teacher.layer_states): the input of an attention read by a hook,
the forward stopped there, and a teacher kept up to one layer, frozen and in eval mode."""

from __future__ import annotations

import pytest
import torch

from bertlab.errors import ConfigError
from bertlab.model import BertModel
from bertlab.teacher.layer_states import LayerTeacher, read_attention_input
from tests.lit.helpers import save_tiny_bert, small_config

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the bird sang a song"] * 4


def test_an_attention_reads_the_previous_layers_output_and_the_forward_can_stop_there():
    model = BertModel(small_config(num_hidden_layers=3)).eval()
    ids = torch.randint(5, 100, (2, 7))
    reference = model(ids, output_hidden_states=True).hidden_states
    ran = []
    model.encoder.layer[2].register_forward_hook(lambda *args: ran.append(True))
    states, output = read_attention_input(model.encoder.layer[1].attention.self, lambda: model(ids), finish=False)
    torch.testing.assert_close(states, reference[1])
    assert output is None and not ran  # the layers above never ran
    states, output = read_attention_input(model.encoder.layer[2].attention.self, lambda: model(ids))
    torch.testing.assert_close(states, reference[2])
    torch.testing.assert_close(output.last_hidden_state, reference[3])
    assert not model.encoder.layer[2].attention.self._forward_pre_hooks  # the hook is gone


def test_a_layer_teacher_is_frozen_cut_at_its_layer_and_reads_what_the_full_model_does(tmp_path):
    folder = save_tiny_bert(tmp_path / "teacher", TEXTS, num_hidden_layers=3)
    teacher = LayerTeacher(str(folder), layer=2)
    full = BertModel.from_pretrained(folder)
    ids = torch.randint(5, teacher.config.vocab_size, (2, 6))
    assert len(teacher.model.encoder.layer) == 2 and not teacher.model.training
    assert not any(parameter.requires_grad for parameter in teacher.model.parameters())
    states = teacher.attention_input(ids, torch.ones_like(ids), None)
    torch.testing.assert_close(states, full(ids, output_hidden_states=True).hidden_states[1])
    with pytest.raises(ConfigError, match=r"task.teacher_layer=4: must be from 1 to the teacher's 3 layers"):
        LayerTeacher(str(folder), layer=4)


def test_a_layer_teacher_runs_in_the_callers_autocast(tmp_path):
    teacher = LayerTeacher(str(save_tiny_bert(tmp_path / "teacher", TEXTS)), layer=1)
    ids = torch.randint(5, teacher.config.vocab_size, (2, 6))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as a bf16-mixed run's training step
        states = teacher.attention_input(ids, None, None)
        query = teacher.attention.query(states)
    assert query.dtype == torch.bfloat16 and not query.requires_grad
