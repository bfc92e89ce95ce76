"""`python -m bertlab shrink CHECKPOINT --layers 4 --hidden 256 --heads 4 --output DIR [--intermediate N]`:
a smaller BERT whose weights are selected from a larger checkpoint's (bertlab.weight_selection), written as
a Hugging Face directory of the same kind (BertModel, masked LM or classifier) with the checkpoint's
tokenizer, for `fine-tune`, `glue` or a distillation to start from. selection.json there records which
layers, heads and dimensions were kept."""

from __future__ import annotations

import json
from pathlib import Path

from bertlab.atomic_files import write_atomically
from bertlab.checkpoint.dispatch import export_pretrained, read_config
from bertlab.checkpoint.fitting import ALLOW_FLAG, check_weights_fit, is_encoder_tensor
from bertlab.commands.arguments import (ArgumentParser, add_allow_reinitialised, add_overwrite, check_output,
                                       checkpoint_folder, positive_int)
from bertlab.errors import CheckpointError, ConfigError, UsageError
from bertlab.model import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, BertModel
from bertlab.tokenizer import load_tokenizer
from bertlab.weight_selection import choose, select_weights, smaller_config

MODEL_CLASSES = {cls.__name__: cls for cls in (BertModel, BertForMaskedLM, BertForPreTraining,
                                                BertForSequenceClassification)}


def load_source(folder: Path, allow_reinitialised: bool = False):
    config = read_config(folder)
    if config.non_bert_keys():
        raise CheckpointError(f"{folder}: shrink selects the weights of a BERT; this model sets "
                              f"{', '.join(config.non_bert_keys())} (docs/variants.md)")
    architecture = (config.architectures or ["BertModel"])[0]
    if architecture not in MODEL_CLASSES:
        raise CheckpointError(f"{folder}: config.json's architecture {architecture} is not one of "
                              f"{', '.join(MODEL_CLASSES)}")
    model = MODEL_CLASSES[architecture].from_pretrained(folder)
    check_weights_fit(model.load_report, str(folder), allow_reinitialised, ALLOW_FLAG)
    heads = [key for key in model.load_report.missing if not is_encoder_tensor(key)]
    if heads:
        raise CheckpointError(f"{folder}: {len(heads)} weight(s) missing from the checkpoint, "
                              f"e.g. {heads[0]}: selection would copy random ones")
    return model


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", type=checkpoint_folder,
                        help="a bertlab or Hugging Face BERT folder, or a run folder")
    parser.add_argument("--layers", type=positive_int, required=True)
    parser.add_argument("--hidden", type=positive_int, required=True)
    parser.add_argument("--heads", type=positive_int, required=True)
    parser.add_argument("--intermediate", type=positive_int, help="feed-forward width (default: 4 × --hidden)")
    parser.add_argument("--output", type=Path, required=True, help="folder for the smaller model")
    add_allow_reinitialised(parser)
    add_overwrite(parser)
    args = parser.parse_args(argv)
    check_output("--output", args.output, args.overwrite)
    folder = Path(args.checkpoint)
    if not folder.is_dir():
        raise UsageError(f"{prog}: {folder}: no such checkpoint folder")
    source = load_source(folder, args.allow_reinitialised)
    try:
        target_config = smaller_config(source.config, layers=args.layers, hidden=args.hidden, heads=args.heads,
                                       intermediate=args.intermediate or 4 * args.hidden)
    except ConfigError as error:
        raise UsageError(f"{prog}: {error}") from None
    state = source.state_dict()
    selection = choose(state, source.config, target_config)
    target = type(source)(target_config)
    target.load_state_dict(select_weights(state, source.config, selection), strict=True)
    export_pretrained(target, load_tokenizer(folder), args.output)
    record = {"source": str(folder), "layers": [layer + 1 for layer in selection.layers],
              "heads": selection.heads, "hidden": selection.hidden.tolist(), "ffn": selection.ffn.tolist(),
              "query_scale": selection.query_scale, "parameters": target.num_parameters,
              "source_parameters": source.num_parameters}
    write_atomically(args.output / "selection.json", lambda temp: Path(temp).write_text(json.dumps(record) + "\n"))
    print(f"{args.output}: {type(target).__name__}, {args.layers} layers × {args.hidden} ({args.heads} heads), "
          f"{target.num_parameters:,} parameters from {source.num_parameters:,}; source layers "
          f"{', '.join(map(str, record['layers']))} of {source.config.num_hidden_layers}, "
          f"{len(selection.heads)} of {source.config.num_attention_heads} heads per layer")
