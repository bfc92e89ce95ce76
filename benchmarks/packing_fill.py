"""How full the packed pretraining sequences are: the share of a batch that is padding, with and without
`data.short_seq_prob`, for the packing bertlab does (inside documents, bertlab.data.packing.SequencePacker) and for
RoBERTa's FULL-SENTENCES packing across documents (simulated here: 256 documents a stream, [SEP] between them).
Every text token enters exactly one sequence either way (tests/data/test_packing.py); what differs is how many
sequences, and so how much padding, carry them. Batches padded to max_seq_length (data.pad_to_max_length) pad
exactly `1 - fill`; length-grouped batches pad to their longest row, about as much.

Run from the repository root: `python -m benchmarks.packing_fill TOKENIZER_JSON [--corpus FILE] [--lines N]`.
"""

from __future__ import annotations

import argparse
import itertools

import datasets
from tokenizers import Tokenizer

from bertlab.data.packing import SequencePacker, group_documents, tokenize_batch

DOCUMENTS_A_STREAM = 256


def packed_rows(documents: list[list[list[int]]], max_seq_length: int, short_seq_prob: float, cls: int,
                sep: int) -> list[list[int]]:
    packer = SequencePacker(datasets.Dataset.from_dict({"input_ids": documents}), max_seq_length=max_seq_length,
                            short_seq_prob=short_seq_prob, nsp=False, seed=0, cls_token_id=cls, sep_token_id=sep)
    return packer({"input_ids": documents}, list(range(len(documents))))["input_ids"]


def streams(documents: list[list[list[int]]], sep: int) -> list[list[list[int]]]:
    """Runs of DOCUMENTS_A_STREAM documents as one document each, a [SEP] closing every document but the last."""
    return [[sentence for index, document in enumerate(group)
             for sentence in [*document[:-1], document[-1] + [sep] * (index < len(group) - 1)]]
            for group in (documents[start:start + DOCUMENTS_A_STREAM]
                          for start in range(0, len(documents), DOCUMENTS_A_STREAM))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("tokenizer", help="a tokenizer.json (e.g. a run's hf_model/tokenizer.json)")
    parser.add_argument("--corpus", default="../shared/data/corpus_large/train.txt")
    parser.add_argument("--lines", type=int, default=20_000, help="the corpus's first lines only")
    parser.add_argument("--max-seq-length", type=int, default=128)
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(args.tokenizer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    with open(args.corpus, encoding="utf-8") as handle:
        lines = list(itertools.islice(handle, args.lines))
    documents = tokenize_batch({"sentences": list(group_documents(lines))}, tokenizer)["input_ids"]
    tokens = sum(len(sentence) for document in documents for sentence in document)
    print(f"{args.lines} lines: {len(documents)} documents, {tokens} tokens ({tokens / len(documents):.0f} a document)")
    print("| packing | short_seq_prob | sequences | mean length | fill | padding |\n| --- | --- | --- | --- | --- | --- |")
    for name, packed in (("inside documents", documents), ("across documents", streams(documents, sep))):
        for short_seq_prob in (0.0, 0.1):
            rows = packed_rows(packed, args.max_seq_length, short_seq_prob, cls, sep)
            fill = sum(map(len, rows)) / len(rows) / args.max_seq_length
            print(f"| {name} | {short_seq_prob} | {len(rows)} | {fill * args.max_seq_length:.1f} | {fill:.3f} | "
                  f"{1 - fill:.3f} |")


if __name__ == "__main__":
    main()
