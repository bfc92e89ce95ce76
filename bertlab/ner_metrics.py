"""Entity-level scores of tag sequences (named-entity recognition), with the `seqeval` package, and the checks
of a tag set's scheme.

An entity counts only with its exact span and type. Two readings of the tags are offered (`scoring`):
`conlleval`, the CoNLL-2003 shared task's script and seqeval's default, which papers report: an `I-X` that
follows `O` or another type starts an entity; and `strict`, seqeval's strict mode under the tag set's scheme
(IOB2, IOBES or BILOU), where an entity must begin with its scheme's opening tag, and ill-formed predictions
score nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from seqeval.metrics import classification_report
from seqeval.scheme import BILOU, IOB2, IOBES

from bertlab.argument_checks import checks_arguments
from bertlab.errors import DataError
from bertlab.value_rules import OneOf

SCORINGS = ("conlleval", "strict")
OUTSIDE = "O"
# Each scheme's prefixes; IOB1 and IOB2 share theirs and differ in use (check_iob_use).
SCHEMES = {"IOB2": ({"B", "I"}, IOB2), "IOBES": ({"B", "I", "E", "S"}, IOBES), "BILOU": ({"B", "I", "L", "U"}, BILOU)}
TYPE_COLUMNS = ("type", "precision", "recall", "f1", "support")


def one_tag_scheme(arguments: Mapping[str, Any]) -> str | None:
    """`label_names`, where given, are tags (`O` and PREFIX-TYPE names) of one scheme: IOB2, IOBES or BILOU. A rule
    of a tag set's names together, declared by the data module that takes them (checked before a run) and by
    `tag_scheme`, which reads the scheme of the names a config, a dataset or a model gives."""
    if (names := arguments["label_names"]) is None:
        return None
    prefixes = {}
    for name in names:
        prefix, dash, kind = name.partition("-") if isinstance(name, str) else ("", "", "")
        if name != OUTSIDE and not (dash and kind and len(prefix) == 1):
            return f"data.label_names: {name!r} is not a tag; expected O or PREFIX-TYPE such as B-PER"
        if name != OUTSIDE:
            prefixes.setdefault(prefix, name)
    if any(set(prefixes) <= allowed for allowed, _ in SCHEMES.values()):
        return None
    known = set().union(*(allowed for allowed, _ in SCHEMES.values()))
    if unknown := sorted(set(prefixes) - known):
        return (f"data.label_names: {prefixes[unknown[0]]!r} has a prefix of no tagging scheme; "
                f"expected IOB2 (B, I), IOBES (B, I, E, S) or BILOU (B, I, L, U)")
    own = {scheme: sorted(set(prefixes) & (allowed - SCHEMES["IOB2"][0])) for scheme, (allowed, _) in SCHEMES.items()}
    return (f"data.label_names mix tagging schemes: {prefixes[own['IOBES'][0]]!r} (IOBES) beside "
            f"{prefixes[own['BILOU'][0]]!r} (BILOU); use one scheme")


@checks_arguments(between=(one_tag_scheme,))
def tag_scheme(label_names: Sequence[str]) -> str:
    """The scheme of a tag set (`O` and PREFIX-TYPE names): IOB2, IOBES or BILOU, the smallest whose
    prefixes cover the names; a ConfigError for a set that is not one scheme's (`one_tag_scheme`)."""
    prefixes = {name.partition("-")[0] for name in label_names if name != OUTSIDE}
    return next(scheme for scheme, (allowed, _) in SCHEMES.items() if prefixes <= allowed)


def check_iob_use(rows: Sequence[Sequence[str]], where: str) -> None:
    """A DataError when IOB rows mix IOB1 (an entity opened by `I-`) with IOB2 (opened by `B-` after `O`,
    which IOB1 never writes): one reading of them would split or join the other's entities."""
    iob1 = iob2 = None
    for row, tags in enumerate(rows):
        previous = OUTSIDE
        for tag in tags:
            kind = tag[2:]
            if tag.startswith("I-") and previous[2:] != kind and iob1 is None:
                iob1 = (row, tag)
            elif tag.startswith("B-") and previous[2:] != kind and iob2 is None:
                iob2 = (row, tag)
            previous = tag
        if iob1 is not None and iob2 is not None:
            raise DataError(f"{where} mixes IOB schemes: row {iob1[0]} opens an entity with {iob1[1]!r} (IOB1) and "
                            f"row {iob2[0]} with {iob2[1]!r} (IOB2); convert the data to one (IOB2: B- opens each)")


@checks_arguments
def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                  scoring: Annotated[str, OneOf(*SCORINGS)] = "conlleval",
                  scheme: str = "IOB2") -> tuple[dict[str, float], list[dict[str, float | str]]]:
    """({precision, recall, f1}: micro over the entities, [per type: TYPE_COLUMNS]) of predicted tag rows
    against the gold ones; `scheme` is read in `strict` scoring only."""
    strict = {"mode": "strict", "scheme": SCHEMES[scheme][1]} if scoring == "strict" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's mean of no types, where no entity is found
        report = classification_report([list(tags) for tags in gold], [list(tags) for tags in predicted],
                                       output_dict=True, zero_division=0, **strict)
    micro = report.pop("micro avg", {"precision": 0.0, "recall": 0.0, "f1-score": 0.0})
    types = [{"type": kind, "precision": float(values["precision"]), "recall": float(values["recall"]),
              "f1": float(values["f1-score"]), "support": int(values["support"])}
             for kind, values in sorted(report.items()) if not kind.endswith(" avg")]
    return {"precision": float(micro["precision"]), "recall": float(micro["recall"]),
            "f1": float(micro["f1-score"])}, types
