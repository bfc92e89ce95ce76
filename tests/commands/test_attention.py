"""`python -m bertlab attention`: the PNGs are written, a pruned model's layers have fewer heads, and a wrong head,
token or folder is one line (the maps themselves: tests/interpret/test_attention_maps.py)."""

from __future__ import annotations

import pytest

from bertlab.interpret.attention_maps import sentence_attentions
from bertlab.model import BertModel
from bertlab.tokenizer import load_tokenizer
from tests.bertlab_runs import run_in_process

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_command_writes_the_grid_one_head_and_one_token(classifier_dir, tmp_path, capsys):
    output = tmp_path / "maps"
    outcome = run_in_process(["attention", str(classifier_dir), "the movie was good", "a dull plot",
                              "--head", "1.3", "--token", "was", "--output", str(output)], capsys)
    assert outcome.code == 0, outcome.err
    tokens = load_tokenizer(classifier_dir).encode("the movie was good", "a dull plot").tokens
    names = sorted(path.name for path in output.iterdir())
    assert names == ["attention_grid.png", "head_1_3.png", f"token_{tokens.index('was')}.png"]
    for name in names:
        assert (output / name).read_bytes().startswith(PNG_SIGNATURE) and (output / name).stat().st_size > 5000


def test_a_pruned_model_draws_its_layers_with_fewer_heads(classifier_dir, tmp_path, capsys):
    model = BertModel.from_pretrained(classifier_dir)
    model.prune_heads({0: [1, 2]})
    pruned = tmp_path / "pruned"
    model.save_pretrained(pruned)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        (pruned / name).write_bytes((classifier_dir / name).read_bytes())
    _, attentions = sentence_attentions(BertModel.from_pretrained(pruned), load_tokenizer(pruned), "a good film")
    assert [layer.shape[0] for layer in attentions] == [2, 4]
    outcome = run_in_process(["attention", str(pruned), "a good film", "--output", str(tmp_path / "maps")], capsys)
    assert outcome.code == 0, outcome.err
    assert (tmp_path / "maps" / "attention_grid.png").stat().st_size > 5000


@pytest.mark.parametrize(("option", "message"), [
    (["--head", "2.0"], "--head 2.0: the model has layers 0-1 with 4 head(s) each"),
    (["--head", "one"], "--head one: expected LAYER.HEAD, e.g. --head 0.1"),
    (["--token", "zebra"], "--token zebra: not a position 0-{last} nor one of the tokens {tokens}"),
])
def test_a_wrong_head_or_token_is_one_line_and_writes_nothing(classifier_dir, tmp_path, capsys, option, message):
    output = tmp_path / "maps"
    outcome = run_in_process(["attention", str(classifier_dir), "a good film", *option, "--output", str(output)], capsys)
    assert outcome.code == 2
    tokens = load_tokenizer(classifier_dir).encode("a good film").tokens
    assert outcome.error_lines == [f"bertlab: error: {message.format(last=len(tokens) - 1, tokens=' '.join(tokens))}"]
    assert not output.exists()


def test_a_folder_without_a_model_is_one_line(tmp_path, capsys):
    outcome = run_in_process(["attention", str(tmp_path), "a good film"], capsys)
    assert outcome.code == 1
    assert len(outcome.error_lines) == 1 and str(tmp_path) in outcome.error_lines[0]
