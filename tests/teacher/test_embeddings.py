"""The teacher of a sentence-embedding distillation (bertlab.teacher.embeddings): its embeddings are
the normalised mean of its last hidden states over each text's tokens, computed once, batched or not
alike, and a rerun loads them from the cache without running the teacher."""

from __future__ import annotations

import pytest
import torch

from bertlab.errors import CheckpointError, ConfigError
from bertlab.model import BertModel
from bertlab.teacher import embeddings as embedding_teacher
from bertlab.tokenizer import load_tokenizer
from tests.lit.helpers import save_tiny_bert

TEXTS = ["a good movie", "the plot was dull and the actors were boring", "great", "a story that moved me a lot"]


@pytest.fixture
def teacher(tmp_path):
    return save_tiny_bert(tmp_path / "teacher", TEXTS * 3)


def test_cached_embeddings_equal_a_fresh_teacher_forward_and_a_rerun_loads_them(teacher, tmp_path, monkeypatch):
    rows_run = []
    forward = BertModel.forward

    def counted_forward(model, input_ids, *args, **kwargs):
        rows_run.append(len(input_ids))
        return forward(model, input_ids, *args, **kwargs)

    monkeypatch.setattr(BertModel, "forward", counted_forward)
    options = dict(max_seq_length=32, batch_size=3, device=torch.device("cpu"), dtype=None, cache_dir=tmp_path)
    computed = embedding_teacher.teacher_embeddings(str(teacher), TEXTS, **options)
    assert sum(rows_run) == len(TEXTS) and not computed.from_cache
    assert computed.embeddings.shape == (len(TEXTS), 32) and computed.labelling["sentences"] == len(TEXTS)

    model, tokenizer = BertModel.from_pretrained(teacher).eval(), load_tokenizer(teacher)
    with torch.no_grad():
        for row, text in enumerate(TEXTS):  # one at a time: no padding
            hidden = forward(model, torch.tensor([tokenizer.encode(text).ids])).last_hidden_state[0]
            fresh = torch.nn.functional.normalize(hidden.mean(0), dim=0)
            torch.testing.assert_close(computed.embeddings[row].float(), fresh, rtol=0, atol=1e-3)

    rows_run.clear()
    loaded = embedding_teacher.teacher_embeddings(str(teacher), TEXTS, **options)
    assert rows_run == [] and loaded.from_cache and loaded.cache_file == computed.cache_file
    assert torch.equal(loaded.embeddings, computed.embeddings) and loaded.labelling == computed.labelling
    other = embedding_teacher.teacher_embeddings(str(teacher), TEXTS[:3], **options)
    assert sum(rows_run) == 3 and not other.from_cache  # other texts: another cache entry


def test_a_missing_teacher_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match=r"^task.teacher is not set: name the teacher, a BertModel folder"):
        embedding_teacher.teacher_config(None)
    with pytest.raises(CheckpointError, match=rf"^task.teacher={tmp_path}/none: no such folder; expected a "
                                              r"BertModel folder .* with its config.json, model.safetensors"):
        embedding_teacher.teacher_config(str(tmp_path / "none"))
