"""Entity scores (bertlab.ner_metrics): conlleval's reading against the strict one, the per-type table, and the
tag sets and IOB rows refused."""

from __future__ import annotations

import pytest

from bertlab.errors import ConfigError, DataError
from bertlab.ner_metrics import check_iob_use, entity_scores, tag_scheme

GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG"]]


def test_an_entity_counts_only_with_its_exact_span_and_type():
    predicted = [["B-PER", "O", "O", "B-LOC"], ["O", "B-LOC", "I-LOC"]]  # PER cut short, ORG typed as LOC
    scores, types = entity_scores(GOLD, predicted)
    assert scores == pytest.approx({"precision": 1 / 3, "recall": 1 / 3, "f1": 1 / 3})
    assert {row["type"]: (row["f1"], row["support"]) for row in types} == {
        "LOC": (pytest.approx(2 / 3), 1), "ORG": (0.0, 1), "PER": (0.0, 1)}


def test_conlleval_reads_an_entity_opened_by_i_the_strict_mode_does_not():
    predicted = [["I-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG"]]
    assert entity_scores(GOLD, predicted, "conlleval")[0]["f1"] == 1.0
    strict = entity_scores(GOLD, predicted, "strict")[0]
    assert strict["recall"] == pytest.approx(2 / 3) and strict["precision"] == 1.0


def test_no_entity_anywhere_scores_zero_without_warnings(recwarn):
    assert entity_scores([["O", "O"]], [["O", "O"]])[0] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert not recwarn.list


@pytest.mark.parametrize("names, scheme", [(["O", "B-PER", "I-PER"], "IOB2"), (["O", "B-X", "I-X", "E-X", "S-X"], "IOBES"),
                                           (["O", "B-X", "I-X", "L-X", "U-X"], "BILOU")])
def test_the_scheme_is_read_from_the_tag_names(names, scheme):
    assert tag_scheme(names) == scheme


@pytest.mark.parametrize("names, message", [(["O", "PER"], "'PER' is not a tag"),
                                            (["O", "X-PER"], "'X-PER' has a prefix of no tagging scheme"),
                                            (["O", "S-PER", "U-PER"], "'S-PER' (IOBES) beside 'U-PER' (BILOU)")])
def test_tag_sets_that_are_not_one_scheme_are_refused(names, message):
    with pytest.raises(ConfigError) as error:
        tag_scheme(names)
    assert message in str(error.value)


def test_rows_of_iob1_beside_iob2_are_refused_naming_both_rows():
    check_iob_use([["I-PER", "I-PER", "B-PER"]], "rows")  # IOB1 alone
    check_iob_use(GOLD, "rows")  # IOB2 alone
    with pytest.raises(DataError, match="row 1 opens an entity with 'I-LOC' \\(IOB1\\) and row 0 with 'B-PER'"):
        check_iob_use([["B-PER", "O"], ["O", "I-LOC"]], "rows")


def test_an_unknown_scoring_is_refused():
    with pytest.raises(ConfigError, match=r"entity_scores\(scoring='loose'\): must be one of conlleval, strict"):
        entity_scores(GOLD, GOLD, "loose")
