"""`python -m bertlab predict CHECKPOINT [TEXT … [--pair TEXT …]] [--file F [--column C] [--text-pair-column C]]
[--output F]`: label and probabilities per input, in input order, as JSON lines (stdout) or a .jsonl/.csv file.
A pair task (RTE, MRPC, …) takes each text's second text from one `--pair` per text, or from a column of the file;
a question-answering checkpoint takes questions as the texts and their contexts as the pairs, and gives answers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.fitting import ALLOW_FLAG, check_weights_fit
from bertlab.commands.arguments import (ArgumentParser, add_allow_reinitialised, add_overwrite, check_output,
                                       checkpoint_folder, output_file, positive_int)
from bertlab.data.sources import load_dataset_source, require_columns
from bertlab.errors import DataError, UsageError
from bertlab.inference import load_classifier, predict
from bertlab.qa_inference import answer, is_span_head, load_span_head
from bertlab.token_inference import is_token_classifier, load_token_classifier, sentence_entities
from bertlab.tokenizer import load_tokenizer


def read_inputs(texts: list[str], pairs: list[str] | None, file: str | None, column: str,
                pair_column: str | None) -> tuple[list[str], list[str] | None]:
    """The texts, and their second texts for a pair task (None for single texts)."""
    if file is None:
        if pair_column:
            raise UsageError(f"--text-pair-column {pair_column}: it names a column of --file, and no --file is given; "
                             f"give a text's second text with --pair")
        if pairs is not None and len(pairs) != len(texts):
            raise UsageError(f"--pair given {len(pairs)} time(s) for {len(texts)} text(s): give one --pair per text")
        return texts, pairs
    if pairs is not None:
        raise UsageError("--pair goes with texts on the command line; a --file's second texts come from "
                         "--text-pair-column")
    path = Path(file)
    if path.suffix == ".txt":
        if pair_column:
            raise UsageError(f"--text-pair-column {pair_column}: a .txt --file has no columns; use a .csv, .jsonl, "
                             f".json or .parquet file")
        if not path.is_file():
            raise DataError(f"--file {path}: no such file")
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return [line for line in lines if line.strip()], None
    dataset = load_dataset_source(str(path), what="prediction inputs")["train"]
    require_columns(dataset, [column, *([pair_column] if pair_column else [])], str(path))
    return [str(text) for text in dataset[column]], [str(text) for text in dataset[pair_column]] if pair_column else None


def records(texts: list[str], pairs: list[str] | None, scores: np.ndarray, id2label: dict[int, str]) -> list[dict]:
    inputs = [{"text": text} for text in texts] if pairs is None \
        else [{"text": text, "text_pair": pair} for text, pair in zip(texts, pairs)]
    if scores.shape[1] == 1:
        return [row | {"value": float(score[0])} for row, score in zip(inputs, scores)]
    return [row | {"label": id2label[int(score.argmax())], "score": round(float(score.max()), 6),
                   "probabilities": {id2label[i]: round(float(p), 6) for i, p in enumerate(score)}}
            for row, score in zip(inputs, scores)]


def write(rows: list[dict], output: Path | None) -> None:
    """JSON lines on stdout, or a .jsonl/.csv file (written whole or not at all)."""
    if output is None:
        for row in rows:
            print(json.dumps(row))
        return
    if output.suffix == ".jsonl":
        text = "".join(json.dumps(row) + "\n" for row in rows)
    else:
        flat = [{k: v for k, v in row.items() if k != "probabilities"}
                | {f"p_{k}": v for k, v in row.get("probabilities", {}).items()} for row in rows]
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
        text = buffer.getvalue()
    write_atomically(output, lambda temp: Path(temp).write_text(text, encoding="utf-8", newline=""))


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", type=checkpoint_folder,
                        help="a fine-tuned checkpoint folder (config.json, model.safetensors, tokenizer), or its run "
                             "folder")
    parser.add_argument("texts", nargs="*", help="sentences to classify")
    parser.add_argument("--file", help="a .txt file (one input per line) or a .csv/.jsonl/.json/.parquet file")
    parser.add_argument("--pair", action="append",
                        help="the second text of a pair task (RTE, MRPC, …): one --pair per text, in their order")
    parser.add_argument("--column", default="sentence", help="the text column of --file (default: sentence)")
    parser.add_argument("--text-pair-column", help="the column of --file with each text's second text (pair tasks)")
    parser.add_argument("--output", type=output_file(".jsonl", ".csv"),
                        help="write .jsonl or .csv here instead of JSON lines on stdout")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--max-seq-length", type=positive_int, default=128)
    add_allow_reinitialised(parser)
    add_overwrite(parser)
    args = parser.parse_args(argv)
    if args.output:
        check_output("--output", args.output, args.overwrite, ())
    texts, pairs = read_inputs(args.texts, args.pair, args.file, args.column, args.text_pair_column)
    if not texts:
        parser.error("nothing to classify: give sentences as arguments or --file")
    if is_span_head(args.checkpoint):
        if pairs is None:
            raise UsageError(f"{args.checkpoint} answers questions from a context: give each question's context "
                             f"with --pair (or --text-pair-column for a --file)")
        model = load_span_head(args.checkpoint)
        check_weights_fit(model.load_report, args.checkpoint, args.allow_reinitialised, ALLOW_FLAG)
        answers = answer(model, load_tokenizer(args.checkpoint), texts, pairs, batch_size=args.batch_size)
        write([{"question": question, "context": context} | found
               for question, context, found in zip(texts, pairs, answers)], args.output)
        return
    if is_token_classifier(args.checkpoint):
        model = load_token_classifier(args.checkpoint)
        check_weights_fit(model.load_report, args.checkpoint, args.allow_reinitialised, ALLOW_FLAG)
        tokenizer = load_tokenizer(args.checkpoint)
        found = sentence_entities(model, tokenizer, texts, batch_size=args.batch_size,
                                  max_seq_length=args.max_seq_length)
        as_text = args.output is not None and args.output.suffix == ".csv"  # a CSV cell holds the list as JSON
        write([{"text": text, "entities": json.dumps(entities) if as_text else entities}
               for text, entities in zip(texts, found)], args.output)
        return
    model = load_classifier(args.checkpoint)
    check_weights_fit(model.load_report, args.checkpoint, args.allow_reinitialised, ALLOW_FLAG)
    tokenizer = load_tokenizer(args.checkpoint)
    scores = predict(model, tokenizer, texts, pairs, batch_size=args.batch_size, max_seq_length=args.max_seq_length)
    write(records(texts, pairs, scores, model.config.id2label), args.output)
