"""`python -m bertlab attention CHECKPOINT "sentence" ["second sentence"] [--head L.H] [--token T] [--output DIR]`:
the attention maps of a BERT (any bertlab or Hugging Face checkpoint) on one sentence or pair —
every layer × head as a PNG grid labelled with the tokens; `--head` enlarges one head; `--token`
(a position or a token's text) shows where that token attends, layer by layer."""

from __future__ import annotations

import re
from pathlib import Path

from bertlab.checkpoint.fitting import ALLOW_FLAG, check_weights_fit, quietly_loaded
from bertlab.commands.arguments import (ArgumentParser, add_allow_reinitialised, add_overwrite, check_output,
                                       checkpoint_folder)
from bertlab.errors import UsageError
from bertlab.interpret.attention_maps import plot_attention_grid, plot_head, plot_token_attention, sentence_attentions
from bertlab.model import BertModel
from bertlab.tokenizer import load_tokenizer


def load_encoder(checkpoint: str, allow_reinitialised: bool = False) -> BertModel:
    """The encoder of any BERT checkpoint (a masked-LM or classifier export, or a bare BertModel).
    Heads left out are expected here, so the load report is not shown; encoder tensors that do not fit are
    refused (bertlab.checkpoint.fitting)."""
    model = quietly_loaded(BertModel, checkpoint)
    check_weights_fit(model.load_report, checkpoint, allow_reinitialised, ALLOW_FLAG)
    return model


DEFAULT_OUTPUT = Path("attention")


def head_choice(text: str, attentions: list) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not match:
        raise UsageError(f"--head {text}: expected LAYER.HEAD, e.g. --head 0.1")
    layer, head = int(match[1]), int(match[2])
    if layer >= len(attentions) or head >= attentions[layer].shape[0]:
        raise UsageError(f"--head {text}: the model has layers 0-{len(attentions) - 1} with "
                         f"{attentions[min(layer, len(attentions) - 1)].shape[0]} head(s) each")
    return layer, head


def token_choice(text: str, tokens: list[str]) -> int:
    """A position, or the first token spelled `text` (case-insensitive)."""
    if text.isdigit() and int(text) < len(tokens):
        return int(text)
    lowered = [token.lower() for token in tokens]
    if text.lower() in lowered:
        return lowered.index(text.lower())
    raise UsageError(f"--token {text}: not a position 0-{len(tokens) - 1} nor one of the tokens "
                     f"{' '.join(tokens)}")


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("checkpoint", type=checkpoint_folder,
                        help="a bertlab run folder (its hf_model/), an export, or a Hugging Face BERT folder")
    parser.add_argument("text")
    parser.add_argument("text_pair", nargs="?", default=None, help="a second sentence (a pair, as for MRPC or NLI)")
    parser.add_argument("--head", help="LAYER.HEAD (from 0) to draw enlarged, e.g. 1.0")
    parser.add_argument("--token", help="a token's position or text: its attention across layers")
    parser.add_argument("--output", type=Path, help=f"folder for the PNGs (default: {DEFAULT_OUTPUT}/)")
    add_allow_reinitialised(parser)
    add_overwrite(parser)
    args = parser.parse_args(argv)
    if not args.text.strip():
        raise UsageError(f"{prog}: the sentence is empty")
    model, tokenizer = load_encoder(args.checkpoint, args.allow_reinitialised), load_tokenizer(args.checkpoint)
    tokens, attentions = sentence_attentions(model, tokenizer, args.text, args.text_pair)
    if len(tokens) > model.config.max_position_embeddings:
        raise UsageError(f"{prog}: {len(tokens)} tokens; the model reads at most {model.config.max_position_embeddings}")
    head = head_choice(args.head, attentions) if args.head else None
    token = token_choice(args.token, tokens) if args.token else None
    names = ["attention_grid.png", *([f"head_{head[0]}_{head[1]}.png"] if head else []),
             *([f"token_{token}.png"] if token is not None else [])]
    output = args.output or DEFAULT_OUTPUT
    if args.output:  # the default folder is this command's scratch space
        check_output("--output", output, args.overwrite, names)
    output.mkdir(parents=True, exist_ok=True)
    name = Path(args.checkpoint).resolve()
    title = f"{name.parent.name}/{name.name}: {len(attentions)} layers × {model.config.num_attention_heads} heads"
    written = [plot_attention_grid(tokens, attentions, output / names[0], title)]
    if head is not None:
        written.append(plot_head(tokens, attentions, *head, output / names[1]))
    if token is not None:
        written.append(plot_token_attention(tokens, attentions, token, output / names[-1]))
    print("tokens: " + " ".join(tokens))
    for path in written:
        print(f"wrote {path}")
