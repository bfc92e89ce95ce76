"""`python -m bertlab evaluate CHECKPOINT [--data SOURCE] [--split validation] [--output F]`:
a fine-tuned checkpoint's metrics on a dataset split or a file, printed and written as JSON. Without --data,
the data its fine-tuning run validated on (the run folder's config.yaml), with that run's columns. For a token
classifier, entity precision, recall and F1 with the per-type table (bertlab.token_inference); for a
question-answering checkpoint, SQuAD's exact match and F1 (bertlab.qa_inference)."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.fitting import ALLOW_FLAG, check_weights_fit
from bertlab.commands.arguments import (ArgumentParser, add_allow_reinitialised, add_labelled_data_options,
                                       add_overwrite, check_output, checkpoint_folder, labelled_data_options,
                                       output_file, positive_int)
from bertlab.errors import UsageError
from bertlab.inference import load_classifier, load_labelled_split, split_metrics
from bertlab.ner_metrics import SCORINGS, TYPE_COLUMNS
from bertlab.qa_inference import is_span_head, load_span_head, split_squad_scores
from bertlab.tables import markdown_table
from bertlab.token_inference import is_token_classifier, load_token_classifier, split_entity_scores
from bertlab.training.launch.config_tree import local_copy
from bertlab.training.run.run_folder import CONFIG


def evaluate(checkpoint: str, data: str, *, batch_size: int = 256, allow_reinitialised: bool = False,
             **data_options) -> dict[str, float]:
    """Metrics of a fine-tuned checkpoint on a labelled split; `data_options` as `load_labelled_split`'s."""
    model = load_classifier(checkpoint)
    check_weights_fit(model.load_report, checkpoint, allow_reinitialised, ALLOW_FLAG)
    return split_metrics(model, load_labelled_split(checkpoint, model, data, **data_options), batch_size=batch_size)


def run_data(checkpoint: str, prog: str) -> dict:
    """The `data` group of the run that exported `checkpoint` (`<run>/hf_model`), from its config.yaml."""
    config = Path(checkpoint).parent / CONFIG
    data = OmegaConf.to_container(OmegaConf.load(config)).get("data") if config.is_file() else None
    if not isinstance(data, dict) or not data.get("source"):
        raise UsageError(f"{prog}: give --data (a hub id such as stanfordnlp/sst2, a folder of split files or a file): "
                         f"{checkpoint} is not the export of a run whose {CONFIG} names its data")
    return data


def evaluate_tagger(checkpoint: str, data: str, *, batch_size: int = 256, allow_reinitialised: bool = False,
                    scoring: str = "conlleval", split: str = "validation", text_column: str = "tokens",
                    label_column: str = "ner_tags", max_seq_length: int = 256, **_) -> tuple[dict, list[dict]]:
    """Entity scores and the per-type rows of a token classifier on a labelled split (words and tags columns)."""
    model = load_token_classifier(checkpoint)
    check_weights_fit(model.load_report, checkpoint, allow_reinitialised, ALLOW_FLAG)
    return split_entity_scores(checkpoint, model, data, split=split, tokens_column=text_column,
                               tags_column=label_column, max_seq_length=max_seq_length, batch_size=batch_size,
                               scoring=scoring)


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", type=checkpoint_folder,
                        help="a fine-tuned checkpoint folder, or the run folder that has it")
    add_labelled_data_options(parser, data_required=False)
    parser.add_argument("--batch-size", type=positive_int, default=256)
    add_allow_reinitialised(parser)
    parser.add_argument("--scoring", choices=SCORINGS, default="conlleval",
                        help="a token classifier's reading of the tags (docs/token_tasks.md; default conlleval); "
                             "its columns default to tokens and ner_tags")
    parser.add_argument("--output", type=output_file(".json"), help="metrics JSON file (default: <checkpoint>/eval_<split>.json)")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    if args.output:  # the default, beside the checkpoint, is this command's own
        check_output("--output", args.output, args.overwrite, ())
    recorded = run_data(args.checkpoint, prog) if args.data is None else None
    data = local_copy(args.data or recorded["source"])
    options = labelled_data_options(args, recorded)
    types = None
    if is_span_head(args.checkpoint):
        model = load_span_head(args.checkpoint)
        check_weights_fit(model.load_report, args.checkpoint, args.allow_reinitialised, ALLOW_FLAG)
        metrics = split_squad_scores(args.checkpoint, model, data, split=options["split"], batch_size=args.batch_size)
    elif is_token_classifier(args.checkpoint):
        # The sentence defaults of the column options name a token dataset's columns here.
        options |= {"text_column": "tokens" if options["text_column"] == "sentence" else options["text_column"],
                    "label_column": "ner_tags" if options["label_column"] == "label" else options["label_column"]}
        metrics, types = evaluate_tagger(args.checkpoint, data, batch_size=args.batch_size,
                                         allow_reinitialised=args.allow_reinitialised, scoring=args.scoring, **options)
    else:
        metrics = evaluate(args.checkpoint, data, batch_size=args.batch_size,
                           allow_reinitialised=args.allow_reinitialised, **options)
    output = Path(args.output or Path(args.checkpoint) / f"eval_{options['split']}.json")
    extra = {} if types is None else {"scoring": args.scoring, "entity_types": types}
    report = json.dumps({"checkpoint": args.checkpoint, "data": data, "split": options["split"], **metrics, **extra},
                        indent=2)
    write_atomically(output, lambda temp: Path(temp).write_text(report + "\n"))
    for key, value in metrics.items():
        print(f"{key}: {value:.4f}")
    if types is not None:
        print("\n".join(markdown_table(TYPE_COLUMNS, [[row[c] if c in ("type", "support") else f"{100 * row[c]:.2f}"
                                                      for c in TYPE_COLUMNS] for row in types])))
    print(f"Metrics written to {output}")
