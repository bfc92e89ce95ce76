"""How much a pretrained masked LM reads a masked token off its copy: `mlm_tiny_wiki`'s copied pairs
([CLS] A [SEP] A' [SEP], data.copy_pair_prob) teach that, and it is what the recipe's STS-B score rests on
(docs/results/pretraining.md). The check builds exact copied pairs from held-out plain text, masks 15% of A's
tokens, and compares the accuracy at those positions with the copy visible and with the copy masked too; the
difference is what the copy adds. A's token i and its copy are half the row apart (63 positions at 128).

Run from the repository root: `python -m experiments.copy_reading RUN_DIR [RUN_DIR …] [--text FILE]`, each
RUN_DIR a pretraining run folder (its hf_model/) or an exported model folder.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from tokenizers import Tokenizer

from bertlab import BertForMaskedLM
from bertlab.commands.arguments import checkpoint_folder

ROWS, MASKED = 256, 0.15


def segments(tokenizer: Tokenizer, text: Path, length: int) -> torch.Tensor:
    """[ROWS, half] consecutive token blocks of the text's paragraphs (those of more than ten words)."""
    half = (length - 3) // 2
    ids: list[int] = []
    for line in text.read_text(encoding="utf-8").splitlines():
        if len(line.split()) > 10:
            ids += tokenizer.encode(line, add_special_tokens=False).ids
        if len(ids) >= ROWS * half:
            break
    return torch.tensor(ids[:ROWS * half]).reshape(-1, half)


def copy_accuracy(model: BertForMaskedLM, tokenizer: Tokenizer, text: Path, length: int) -> tuple[float, float]:
    """Masked-token accuracy in A with its copy visible, and with the copy masked at the same positions."""
    cls, sep, mask = (tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]", "[MASK]"))
    a = segments(tokenizer, text, length)
    rows, half = a.shape
    cls_column, sep_column = torch.full((rows, 1), cls), torch.full((rows, 1), sep)
    input_ids = torch.cat([cls_column, a, sep_column, a, sep_column], dim=1)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, half + 2:] = 1
    chosen = torch.rand(a.shape, generator=torch.Generator().manual_seed(0)) < MASKED
    first, copy = slice(1, half + 1), slice(half + 2, 2 * half + 2)
    accuracies = []
    for copy_masked in (False, True):
        masked = input_ids.clone()
        masked[:, first][chosen] = mask
        if copy_masked:
            masked[:, copy][chosen] = mask
        types = dict(token_type_ids=token_type_ids) if model.config.type_vocab_size else {}
        with torch.no_grad():
            predicted = model(input_ids=masked, **types).logits[:, first].argmax(-1)
        accuracies.append((predicted[chosen] == a[chosen]).float().mean().item())
    return accuracies[0], accuracies[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=checkpoint_folder)
    parser.add_argument("--text", type=Path,
                        default=Path(os.environ.get("BERTLAB_DATA_DIR", "../shared/data")) / "corpus" / "validation.txt",
                        help="plain text, one paragraph a line (default: corpus/validation.txt in $BERTLAB_DATA_DIR, "
                             "else ../shared/data)")
    parser.add_argument("--length", type=int, default=128, help="the pretraining's row length")
    args = parser.parse_args()
    print("| model | local window | accuracy, copy visible | copy masked too | what the copy adds |")
    print("| --- | --- | --- | --- | --- |")
    for run in args.runs:
        model = BertForMaskedLM.from_pretrained(run).eval()
        tokenizer = Tokenizer.from_file(str(Path(run) / "tokenizer.json"))
        visible, hidden = copy_accuracy(model, tokenizer, args.text, args.length)
        window = model.config.local_attention_window
        print(f"| {run} | {window or 'none'} | {visible:.3f} | {hidden:.3f} | {visible - hidden:+.3f} |")


if __name__ == "__main__":
    main()
