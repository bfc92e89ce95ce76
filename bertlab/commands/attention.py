"""`python -m bertlab attention CHECKPOINT "sentence" ["second sentence"] [--head L.H] [--token T] [--output DIR]`:
the attention maps of a BERT (any bertlab or Hugging Face checkpoint) on one sentence or pair —
every layer × head as a PNG grid labelled with the tokens; `--head` enlarges one head; `--token`
(a position or a token's text) shows where that token attends, layer by layer."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from bertlab.commands.arguments import ArgumentParser, checkpoint_folder
from bertlab.errors import CheckpointError, UsageError
from bertlab.interpret.attention_maps import plot_attention_grid, plot_head, plot_token_attention, sentence_attentions
from bertlab.model import BertModel
from bertlab.tokenizer import load_tokenizer


def load_encoder(checkpoint: str) -> BertModel:
    """The encoder of any BERT checkpoint (a masked-LM or classifier export, or a bare BertModel).
    Heads left out are expected here, so the load report is not shown; missing encoder tensors are refused."""
    logger = logging.getLogger("bertlab")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        model = BertModel.from_pretrained(checkpoint)
    finally:
        logger.setLevel(level)
    missing = [key for key in model.load_report.missing if not key.startswith("pooler.")]
    if missing:
        raise CheckpointError(f"{checkpoint}: {len(missing)} encoder tensor(s) missing from its weights, "
                              f"e.g. {missing[0]}: not a trained BERT")
    return model


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
    parser.add_argument("--output", type=Path, default=Path("attention"), help="folder for the PNGs (default: attention/)")
    args = parser.parse_args(argv)
    if not args.text.strip():
        raise UsageError(f"{prog}: the sentence is empty")
    model, tokenizer = load_encoder(args.checkpoint), load_tokenizer(args.checkpoint)
    tokens, attentions = sentence_attentions(model, tokenizer, args.text, args.text_pair)
    if len(tokens) > model.config.max_position_embeddings:
        raise UsageError(f"{prog}: {len(tokens)} tokens; the model reads at most {model.config.max_position_embeddings}")
    head = head_choice(args.head, attentions) if args.head else None
    token = token_choice(args.token, tokens) if args.token else None
    args.output.mkdir(parents=True, exist_ok=True)
    name = Path(args.checkpoint).resolve()
    title = f"{name.parent.name}/{name.name}: {len(attentions)} layers × {model.config.num_attention_heads} heads"
    written = [plot_attention_grid(tokens, attentions, args.output / "attention_grid.png", title)]
    if head is not None:
        written.append(plot_head(tokens, attentions, *head, args.output / f"head_{head[0]}_{head[1]}.png"))
    if token is not None:
        written.append(plot_token_attention(tokens, attentions, token, args.output / f"token_{token}.png"))
    print("tokens: " + " ".join(tokens))
    for path in written:
        print(f"wrote {path}")
