"""An export of each format (BERT, ModernBERT, bertlab's own code) works in the libraries people hand it to:
sentence-transformers' SentenceTransformer(folder).encode and transformers' feature-extraction pipeline,
in a process where bertlab cannot be imported, give bertlab's own hidden states."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from bertlab import BertForMaskedLM, BertModel
from bertlab.checkpoint import bert, modernbert, remote_code
from bertlab.checkpoint.dispatch import export_pretrained, save_format
from bertlab.tokenizer import train_tokenizer
from tests.checkpoint.test_modernbert import BLOCK_BERTLAB, MODERNBERT, run_without_bertlab
from tests.factories import perturbed, small_config

pytest.importorskip("sentence_transformers")

SENTENCES = ["the cat sat on the mat", "a dog ran far away from the cat"]
FORMATS = {"bert": {}, "modernbert": MODERNBERT, "remote_code": dict(position_embedding_type="rotary")}
MODULES = {"bert": bert, "modernbert": modernbert, "remote_code": remote_code}
TOLERANCE = 1e-5


@pytest.mark.slow
def test_sentence_transformers_and_the_feature_extraction_pipeline_read_every_export_format(tmp_path):
    tokenizer = train_tokenizer(SENTENCES * 10, vocab_size=60)
    expected = {}
    for name, knobs in FORMATS.items():
        config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=3, num_attention_heads=2,
                              **knobs)
        torch.manual_seed(0)
        model = perturbed(BertForMaskedLM(config), seed=3).eval()
        assert save_format(model) is MODULES[name]
        export_pretrained(model, tokenizer, tmp_path / name)
        encoder = BertModel.from_pretrained(tmp_path / name)
        rows = [tokenizer.encode(sentence) for sentence in SENTENCES]
        with torch.no_grad():
            hidden = [encoder(torch.tensor([row.ids])).last_hidden_state[0] for row in rows]
        expected[name] = {"first": hidden[0], "means": torch.stack([states.mean(0) for states in hidden])}
    script = BLOCK_BERTLAB + textwrap.dedent(f"""
        import torch, transformers, sentence_transformers
        transformers.logging.set_verbosity_error()
        results = {{}}
        for name in {list(FORMATS)!r}:
            folder = {str(tmp_path)!r} + "/" + name
            encoder = sentence_transformers.SentenceTransformer(folder, device="cpu", trust_remote_code=True)
            pipeline = transformers.pipeline("feature-extraction", model=folder, device="cpu", trust_remote_code=True)
            results[name] = {{"means": torch.as_tensor(encoder.encode({SENTENCES!r})),
                             "first": torch.tensor(pipeline({SENTENCES[0]!r})[0])}}
        torch.save(results, {str(tmp_path / "results.pt")!r})
    """)
    run_without_bertlab(script, tmp_path)
    results = torch.load(tmp_path / "results.pt")
    for name in FORMATS:
        for key in ("first", "means"):
            torch.testing.assert_close(results[name][key], expected[name][key], atol=TOLERANCE, rtol=0,
                                       msg=f"{name} {key}")


def test_a_modernbert_export_has_its_tokenizer_leave_out_token_types(tmp_path):
    tokenizer = train_tokenizer(SENTENCES * 10, vocab_size=60)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=3, num_attention_heads=2,
                          **MODERNBERT)
    export_pretrained(BertForMaskedLM(config), tokenizer, tmp_path)
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert saved["model_input_names"] == ["input_ids", "attention_mask"]
