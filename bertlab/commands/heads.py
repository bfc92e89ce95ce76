"""`python -m bertlab heads CLASSIFIER --data SOURCE [--split validation] [--step N] [--export DIR --max-drop 1.0]`:
which attention heads a fine-tuned classifier needs. Writes into --output (default <CLASSIFIER>/heads/)
head_importance.csv (Michel et al. 2019: |∂loss/∂head gate| over the split, normalised per layer),
pruning_curve.csv (the split's metrics with the least important heads masked, k at a time) and
heads.png (both). --export writes the model with the most heads removed whose metric stays within
--max-drop points of the full model's (a loss or an error rising, any other metric falling), pruned physically (smaller matrices, config.json's
pruned_heads), and times predict on the split for both models."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.dispatch import export_pretrained
from bertlab.checkpoint.fitting import ALLOW_FLAG, check_weights_fit
from bertlab.commands.arguments import (ArgumentParser, add_allow_reinitialised, add_labelled_data_options,
                                       add_overwrite, check_output, checkpoint_folder, labelled_data_options,
                                       positive_int)
from bertlab.errors import UsageError
from bertlab.inference import LabelledSplit, classifier_logits, load_classifier, load_labelled_split, split_metrics
from bertlab.interpret.head_importance import (head_importance, heads_to_prune, least_important_first,
                                               most_pruned_within, plot_heads, pruning_curve)
from bertlab.lit.classification import validation_metrics
from bertlab.tokenizer import load_tokenizer
from bertlab.training.launch.config_tree import local_copy


RESULTS = ("head_importance.csv", "pruning_curve.csv", "heads.png", "heads.json")


def write_csv(path: Path, rows: list[dict]) -> None:
    def write(temp: str) -> None:
        with open(temp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write)


def sentences_per_second(model, data: LabelledSplit, batch_size: int, repeats: int = 3) -> float:
    """The best of `repeats` timed passes over the split (after one warm-up pass)."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        classifier_logits(model, data.rows, data.lengths, pad_token_id=data.pad_token_id, batch_size=batch_size)
        times.append(time.perf_counter() - start)
    return len(data.rows) / min(times[1:])


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", type=checkpoint_folder,
                        help="a fine-tuned classifier folder, or the run folder that has it")
    add_labelled_data_options(parser)
    parser.add_argument("--metric", help="the metric of the curve (default: accuracy; pearson for regression)")
    parser.add_argument("--step", type=positive_int, default=1, help="heads masked between two points of the curve")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--max-drop", type=float, default=1.0, help="points of the metric the pruned model may lose")
    parser.add_argument("--export", type=Path, help="folder for the pruned model (a Hugging Face directory)")
    parser.add_argument("--output", type=Path, help="folder for the CSVs and the PNG (default: <checkpoint>/heads/)")
    add_allow_reinitialised(parser)
    add_overwrite(parser)
    args = parser.parse_args(argv)
    if args.max_drop < 0:
        raise UsageError(f"{prog}: --max-drop {args.max_drop}: expected points >= 0")
    if args.output:  # the default, <checkpoint>/heads/, is this command's own
        check_output("--output", args.output, args.overwrite, RESULTS)
    if args.export:
        check_output("--export", args.export, args.overwrite)
    model = load_classifier(args.checkpoint)
    check_weights_fit(model.load_report, args.checkpoint, args.allow_reinitialised, ALLOW_FLAG)
    metric = args.metric or ("pearson" if model.config.num_labels == 1 else "accuracy")
    metrics = ["loss", *(name.removeprefix("val/") for name in validation_metrics(model.config).keys())]
    if metric not in metrics:
        raise UsageError(f"{prog}: --metric {metric}: expected one of {', '.join(metrics)}")
    options = labelled_data_options(args)
    data = load_labelled_split(args.checkpoint, model, local_copy(args.data), **options)
    output = args.output or Path(args.checkpoint) / "heads"
    output.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    importance = head_importance(model, data, batch_size=args.batch_size)
    order = least_important_first(importance)
    rank = {head: position for position, head in enumerate(order)}
    write_csv(output / "head_importance.csv",
              [{"layer": layer, "head": head, "importance": float(importance[layer, head]),
                "prune_rank": rank[(layer, head)]} for layer in range(importance.shape[0])
               for head in range(importance.shape[1])])
    print(f"head importance over {len(data.rows)} examples in {time.perf_counter() - start:.0f} s")
    curve = pruning_curve(model, data, order, step=args.step)
    write_csv(output / "pruning_curve.csv", curve)
    full = curve[0][metric]
    keep = most_pruned_within(curve, metric, args.max_drop)
    plot_heads(importance, curve, metric, args.max_drop, output / "heads.png")
    print(f"{metric}: {100 * full:.2f} with all {len(order)} heads; {keep['heads_pruned']} can go at "
          f"< {args.max_drop} point(s) of loss ({100 * keep[metric]:.2f} with {keep['heads_left']} heads)")
    summary = {"checkpoint": args.checkpoint, "data": args.data, "split": options["split"], "metric": metric,
               "full": full, "max_drop_points": args.max_drop, "prunable_heads": keep["heads_pruned"],
               "pruned_metric": keep[metric]}
    if args.export:
        unpruned_speed, unpruned_parameters = sentences_per_second(model, data, args.batch_size), model.num_parameters
        model.prune_heads(heads_to_prune(order, keep["heads_pruned"]))
        pruned_metrics = split_metrics(model, data)
        pruned_speed = sentences_per_second(model, data, args.batch_size)
        export_pretrained(model, load_tokenizer(args.checkpoint), args.export)
        summary |= {"export": str(args.export), "export_metric": pruned_metrics[metric],
                    "parameters": model.num_parameters, "unpruned_parameters": unpruned_parameters,
                    "predict_sentences_per_s": pruned_speed,
                    "unpruned_predict_sentences_per_s": unpruned_speed}
        print(f"pruned model in {args.export}: {metric} {100 * pruned_metrics[metric]:.2f}, "
              f"{model.num_parameters:,} parameters (from {unpruned_parameters:,}), predict {pruned_speed:.0f} sentences/s against "
              f"{unpruned_speed:.0f} unpruned ({pruned_speed / unpruned_speed:.2f}×)")
    write_atomically(output / "heads.json", lambda temp: Path(temp).write_text(json.dumps(summary, indent=2) + "\n"))
    for name in RESULTS:
        print(f"wrote {output / name}")
