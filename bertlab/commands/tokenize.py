"""`python -m bertlab tokenize TOKENIZER "text" ["second text"] [--json]`: what BERT's tokenizer makes
of a sentence or pair, stage by stage — the normalised text, the basic tokens (whitespace and
punctuation split) with their character spans, each one's WordPiece pieces and ids ([UNK] and why),
and the final sequence with [CLS]/[SEP], ids and token type ids. TOKENIZER is a checkpoint folder,
a vocab.txt or a tokenizer.json."""

from __future__ import annotations

import dataclasses
import json
import unicodedata

from tokenizers import Tokenizer, normalizers

from bertlab.commands.arguments import ArgumentParser, checkpoint_folder
from bertlab.errors import UsageError
from bertlab.tokenizer import load_tokenizer
from bertlab.tokenizer_stages import SentenceStages, TokenizerStages, tokenizer_stages

SENTENCE_NAMES = "AB"
LONGEST_CELL = 32  # display columns; longer words are cut short
ESCAPES = str.maketrans({chr(code): repr(chr(code))[1:-1] for code in [*range(32), 127]})  # \t, \n, \x00 …


def display_width(text: str) -> int:
    """Terminal columns: CJK characters and emoji take two, combining accents none."""
    return sum(0 if unicodedata.combining(character) else 2 if unicodedata.east_asian_width(character) in "WF" else 1
               for character in text)


def visible(text: str, limit: int | None = None) -> str:
    """`text` on one line (control characters escaped), cut to `limit` columns with its length noted."""
    shown = text.translate(ESCAPES)
    if limit is None or display_width(shown) <= limit:
        return shown
    suffix = f"… ({len(text)} characters)"
    cut = ""
    for character in shown:
        if display_width(cut + character + suffix) > limit:
            break
        cut += character
    return cut + suffix


def table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(display_width(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return [indent + "  ".join(cell + " " * (width - display_width(cell)) for cell, width in zip(row, widths)).rstrip()
            for row in [header, *rows]]


def sentence_lines(name: str, sentence: SentenceStages) -> list[str]:
    lines = [f"sentence {name}", f"  text        {visible(sentence.text)}",
             f"  normalised  {visible(sentence.normalized)}", ""]
    rows = []
    for index, basic in enumerate(sentence.basic_tokens):
        cells = [str(index), f"{basic.span[0]}:{basic.span[1]}", visible(basic.original, LONGEST_CELL),
                 visible(basic.normalized, LONGEST_CELL)]
        note = "special token, kept whole" if basic.special else basic.unknown or ""
        for piece in basic.pieces:  # the basic token's own cells on its first piece's row only
            rows.append([*cells, piece.token, str(piece.id), note])
            cells, note = [""] * len(cells), ""
    header = ["basic token", "span", "original", "normalised", "WordPiece", "id", "note"]
    return lines + (table(header, rows) if rows else ["  (no basic tokens: nothing left after normalisation)"])


def final_lines(stages: TokenizerStages) -> list[str]:
    final = stages.final
    template = "[CLS] A [SEP] B [SEP]" if len(stages.sentences) == 2 else "[CLS] A [SEP]"
    rows = []
    for position, (token, id, type_id, source) in enumerate(
            zip(final.tokens, final.input_ids, final.token_type_ids, final.sources)):
        if source is None:
            origin = "added"
        else:
            sentence, index = source
            basic = stages.sentences[sentence].basic_tokens[index]
            origin = f"{SENTENCE_NAMES[sentence]} {index} {visible(basic.original, LONGEST_CELL)}"
        rows.append([str(position), token, str(id), str(type_id), origin])
    return [f"final sequence: {template}, {len(final.tokens)} tokens"] + table(
        ["position", "token", "id", "token type", "from basic token"], rows)


def settings_line(tokenizer: Tokenizer) -> str:
    model, normalizer = tokenizer.model, tokenizer.normalizer
    line = (f"tokenizer: WordPiece, {tokenizer.get_vocab_size():,} tokens, "
            f"words over {model.max_input_chars_per_word} characters become {model.unk_token}")
    if isinstance(normalizer, normalizers.BertNormalizer):
        strips_accents = normalizer.lowercase if normalizer.strip_accents is None else normalizer.strip_accents
        steps = [("clean-up", normalizer.clean_text), ("spaces around CJK characters", normalizer.handle_chinese_chars),
                 ("lower-casing", normalizer.lowercase), ("accent stripping", strips_accents)]
        line += "; normaliser: " + (", ".join(step for step, on in steps if on) or "none")
    return line


def report(tokenizer: Tokenizer, stages: TokenizerStages) -> str:
    lines = [settings_line(tokenizer), ""]
    for name, sentence in zip(SENTENCE_NAMES, stages.sentences):
        lines += sentence_lines(name, sentence) + [""]
    return "\n".join(lines + final_lines(stages))


def main(argv: list[str], prog: str) -> None:
    parser = ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("tokenizer", type=checkpoint_folder,
                        help="a checkpoint folder (tokenizer.json or vocab.txt) or its run folder, a vocab.txt "
                             "or a tokenizer.json")
    parser.add_argument("text")
    parser.add_argument("text_pair", nargs="?", default=None, help="a second text (a pair, as for MRPC or NLI)")
    parser.add_argument("--json", action="store_true", help="print the stages as JSON instead of tables")
    args = parser.parse_args(argv)
    for name, text in (("text", args.text), ("second text", args.text_pair)):
        if text is not None and not text.strip():
            raise UsageError(f"{prog}: the {name} is empty")
    tokenizer = load_tokenizer(args.tokenizer)
    stages = tokenizer_stages(tokenizer, args.text, args.text_pair)
    if args.json:
        print(json.dumps(dataclasses.asdict(stages), ensure_ascii=False, indent=2))
    else:
        print(report(tokenizer, stages))
