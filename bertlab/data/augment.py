"""The texts of a distillation's transfer set beyond the labelled training data: augmented copies of
the task's examples and unlabelled in-domain text, for the teacher to label.

Augmentation follows Tang et al. 2019 ("Distilling Task-Specific Knowledge from BERT into Simple
Neural Networks", §3.2), with TinyBERT's masked-LM replacement (Jiao et al. 2020) in place of their
part-of-speech swap. A copy goes over a text's words (whitespace tokens: GLUE's texts come tokenized)
and draws X ~ U[0, 1) for each: X < p_mask puts the literal "[MASK]" there; p_mask <= X < p_mask +
p_replace puts one of the masked LM's top-K predictions for that word, drawn uniformly. The masked LM
reads the original text with only that word masked, and predicts only for a word that is one
whole-word WordPiece and not punctuation; other words stay, as does every word when no masked LM is
given. Then, with p_ngram, the copy keeps only n consecutive words, n uniform in 1..max_ngram. The
two texts of a sentence pair are augmented independently. A copy identical to its example, or to an
earlier copy of it, is dropped: an example gives at most `copies` new ones.

Every random draw comes from one `random.Random(seed)` before the masked LM runs, so the same seed
gives the same texts, and the same positions masked with or without a masked LM. The masked LM runs
once per (text, word) that some copy replaces, in length-sorted batches.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from pathlib import Path

import torch
from tokenizers import Tokenizer

from bertlab.argument_checks import Count, Items, Probability, Shares, checks_arguments
from bertlab.data.sources import load_dataset_source, read_text_lines, require_columns
from bertlab.errors import CheckpointError, DataError
from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import SPECIAL_TOKENS, load_tokenizer, special_token_ids
from bertlab.value_rules import Interval

log = logging.getLogger("bertlab")
MASK = "[MASK]"
CONNECTIVES = (" , but ", " , and ", " . ", " ; ", " , although ", " , yet ")  # GLUE's texts come tokenized
PROGRESS_EVERY_SECONDS = 10.0
TEXT_FILE_SUFFIXES = (".txt", ".tsv")
Example = tuple[str, ...]  # one text, or the two of a sentence pair
Plan = tuple[list, tuple[int, int] | None]  # per word None (keep), MASK or a draw in [0, 1) (replace); the n-gram kept


@dataclass(frozen=True)
class Probabilities:
    """Per word, exclusive: `mask` (the literal [MASK]) and `replace` (a masked LM's prediction); per
    copy of a text: `ngram` (keep n consecutive words, n uniform in 1..max_ngram).

    mask 0.1, ngram 0.25 and max_ngram 5 are Tang et al.'s. replace 0.2: their part-of-speech swap
    took 0.1 of the words; TinyBERT replaces with 0.4, but only words that are not stop words, about
    half of SST-2's; here stop words are eligible too, and the masked LM may be a small one. `augment`, which
    takes them, checks their ranges and their shares."""
    mask: float = 0.1
    replace: float = 0.2
    ngram: float = 0.25
    max_ngram: int = 5


@checks_arguments
class MaskedLM:
    """A BertForMaskedLM and its tokenizer: its top-K whole-word predictions for one word masked in a text."""

    def __init__(self, model: BertForMaskedLM, tokenizer: Tokenizer, *, top_k: Count = 15, batch_size: Count = 512,
                 max_seq_length: Annotated[int, Interval("[4, inf)")] = 128, bf16: bool = False) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        if tokenizer.padding is not None:  # words are encoded in batches, each on its own
            tokenizer.no_padding()
        self.top_k, self.batch_size, self.bf16 = top_k, batch_size, bf16
        self.max_seq_length = min(max_seq_length, model.config.max_position_embeddings)
        self.special = special_token_ids(tokenizer)
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self.tokens = {index: token for token, index in vocab.items()}
        self.whole_words = torch.zeros(model.config.vocab_size, dtype=torch.bool)
        self.whole_words[[index for token, index in vocab.items()
                          if index < model.config.vocab_size and _is_whole_word(token)]] = True
        self._pieces: dict[str, list[int]] = {}

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **settings) -> MaskedLM:
        """A bertlab or Hugging Face BertForMaskedLM folder with its tokenizer; one without a trained
        masked-LM head (a classifier) is refused: its predictions would be random."""
        model = BertForMaskedLM.from_pretrained(path)
        report = model.load_report
        untrained = [key for key in (*report.missing, *(key for key, _, _ in report.mismatched))
                     if key.startswith("cls.")]
        if untrained:
            raise CheckpointError(f"{path}: no trained masked-LM head ({', '.join(untrained)} not in its weights); "
                                  f"give a masked-LM export such as outputs/mlm_tiny/latest/hf_model")
        return cls(model, load_tokenizer(path), **settings)

    def word_id(self, word: str) -> int | None:
        """The id of `word` when it is one whole-word WordPiece (not punctuation, not special), else None."""
        if word not in self._pieces:
            self._encode([word])
        pieces = self._pieces[word]
        return pieces[0] if len(pieces) == 1 and self.whole_words[pieces[0]] else None

    @torch.inference_mode()
    def predict(self, texts: Sequence[Sequence[str]], positions: Sequence[int]) -> list[list[str]]:
        """For each text (its words) and position: up to top_k predictions for that word masked, best
        first, the word itself left out; [] where the word is not one whole-word WordPiece."""
        self._encode(word for words in texts for word in words)
        rows = [(index, *self._masked_row(words, position))
                for index, (words, position) in enumerate(zip(texts, positions))
                if self.word_id(words[position]) is not None]
        rows.sort(key=lambda row: len(row[1]), reverse=True)  # longest first: little padding in a batch
        predictions: list[list[str]] = [[] for _ in texts]
        started = reported = time.perf_counter()
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start:start + self.batch_size]
            for row, ids in zip(batch, self._top_k(batch)):
                predictions[row[0]] = [self.tokens[index] for index in ids]
            if time.perf_counter() - reported >= PROGRESS_EVERY_SECONDS:
                reported = time.perf_counter()
                done, rate = start + len(batch), (start + len(batch)) / (reported - started)
                log.info("Masked LM: %d/%d words, %.0f/s, %.0f s to go", done, len(rows), rate,
                         (len(rows) - done) / rate)
        return predictions

    def _encode(self, words: Iterable[str]) -> None:
        """WordPiece ids of each word not seen yet. BERT's normaliser and pre-tokenizer work within
        whitespace-separated words, so a text's ids are its words' ids put together."""
        new = list(dict.fromkeys(word for word in words if word not in self._pieces))
        for word, encoding in zip(new, self.tokenizer.encode_batch(new, add_special_tokens=False)):
            self._pieces[word] = encoding.ids

    def _masked_row(self, words: Sequence[str], position: int) -> tuple[list[int], int, int]:
        """[CLS] words [SEP] as ids, the word at `position` masked (in a window around it when too long),
        the mask's index and the word's id."""
        before = [index for word in words[:position] for index in self._pieces[word]]
        after = [index for word in words[position + 1:] for index in self._pieces[word]]
        room = self.max_seq_length - 3
        kept_before = min(len(before), max(room // 2, room - len(after)))
        ids = [self.special["cls"], *before[len(before) - kept_before:], self.special["mask"],
               *after[:room - kept_before], self.special["sep"]]
        return ids, kept_before + 1, self._pieces[words[position]][0]

    def _top_k(self, batch: list[tuple[int, list[int], int, int]]) -> list[list[int]]:
        length = max(len(ids) for _, ids, _, _ in batch)
        input_ids = torch.tensor([ids + [self.special["pad"]] * (length - len(ids)) for _, ids, _, _ in batch])
        device = next(self.model.parameters()).device
        rows = torch.arange(len(batch), device=device)
        masks = torch.tensor([mask for _, _, mask, _ in batch], device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model.bert(input_ids.to(device), (input_ids != self.special["pad"]).long().to(device))
            logits = self.model.cls.predictions(hidden.last_hidden_state[rows, masks]).float()
        logits.masked_fill_(~self.whole_words.to(device), -math.inf)
        logits[rows, torch.tensor([word for *_, word in batch], device=device)] = -math.inf
        scores, ids = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1)
        return [row_ids[row_scores > -math.inf].tolist() for row_scores, row_ids in zip(scores.cpu(), ids.cpu())]


@checks_arguments(between=(Shares(("p_mask", "p_replace"), "each word is masked, replaced or kept"),))
def augment(examples: Sequence[Sequence[str]], copies: Annotated[int, Interval("[0, inf)", whole=True)], seed: int,
            masked_lm: MaskedLM | str | os.PathLike | None = None, *, p_mask: Probability = 0.1,
            p_replace: Probability = 0.2, p_ngram: Probability = 0.25,
            max_ngram: Annotated[int, Interval("[1, inf)", whole=True)] = 5) -> list[Example]:
    """Up to `copies` augmented copies of each example (a tuple of one text, or two for a sentence
    pair), in example order, the same for the same seed. `masked_lm`, a MaskedLM or a BertForMaskedLM
    folder, does the replacing; without one, words are only masked and cut to n-grams."""
    probabilities = Probabilities(p_mask, p_replace, p_ngram, max_ngram)
    started = time.perf_counter()
    words = [_words(example, index) for index, example in enumerate(examples)]
    rng = random.Random(seed)
    plans = [[[_plan(text, rng, probabilities) for text in example] for _ in range(copies)] for example in words]
    masked_lm = _masked_lm(masked_lm, p_replace)
    predictions = _predictions(masked_lm, words, plans) if masked_lm is not None else {}
    augmented = [copy for index, (example, example_plans) in enumerate(zip(words, plans))
                 for copy in _unique_copies(index, example, example_plans, predictions)]
    log.info("Augmented %d examples × %d copies: %d new, the others duplicates (%.1f s)", len(words), copies,
             len(augmented), time.perf_counter() - started)
    return augmented


def single_texts(arguments: Mapping[str, Any]) -> str | None:
    """Joined texts join single texts: a pair task's examples have none to join."""
    if arguments["count"] and any(len(example) != 1 for example in arguments["examples"]):
        return "data.transfer.joined joins single texts; this task's examples are sentence pairs"
    return None


@checks_arguments(between=(single_texts,))
def joined(examples: Sequence[Sequence[str]], count: Annotated[int, Interval("[0, inf)", whole=True)], seed: int, *,
           max_words: int = 20) -> list[Example]:
    """`count` texts that each join two training texts of 3 to `max_words` words with a connective (", but",
    ", and", ". ", …), the same for the same seed: texts of a sentence's length with a turn in them, for a
    task whose training texts are mostly phrases (SST-2's median 7 words; its validation sentences' 19).
    Single-text examples only; a joined text equal to an example or to another joined one is drawn again."""
    if count == 0:
        return []
    texts = [example[0].strip() for example in examples if 3 <= len(example[0].split()) <= max_words]
    if len(texts) < 2:
        raise DataError(f"data.transfer.joined needs two training texts of 3 to {max_words} words; found {len(texts)}")
    rng = random.Random(seed)
    seen = {example[0] for example in examples}
    made: list[Example] = []
    for _ in range(count * 10):  # bounded: a small training set cannot give every count
        first, second = rng.sample(texts, 2)
        text = f"{first.rstrip(' .;,')}{rng.choice(CONNECTIVES)}{second}"
        if text not in seen:
            seen.add(text)
            made.append((text,))
            if len(made) == count:
                break
    log.info("Joined %d pairs of training texts", len(made))
    return made


def _words(example: Sequence[str], index: int) -> list[list[str]]:
    if isinstance(example, str) or not 1 <= len(example) <= 2 or not all(isinstance(text, str) for text in example):
        raise DataError(f"example {index} is {str(example)[:80]!r}; expected a tuple of 1 or 2 texts")
    return [text.split() for text in example]


def _plan(words: list[str], rng: random.Random, p: Probabilities) -> Plan:
    """One copy's draws for a text: per word keep, mask or replace (with the draw that picks the
    prediction), and the n-gram kept, if any."""
    operations = []
    for _ in words:
        x = rng.random()
        operations.append(MASK if x < p.mask else rng.random() if x < p.mask + p.replace else None)
    ngram = None
    if words and rng.random() < p.ngram:
        n = min(rng.randint(1, p.max_ngram), len(words))
        start = rng.randrange(len(words) - n + 1)
        ngram = (start, start + n)
    return operations, ngram


def _masked_lm(masked_lm: MaskedLM | str | os.PathLike | None, p_replace: float) -> MaskedLM | None:
    if p_replace == 0:
        return None
    if masked_lm is None:
        log.warning("Augmenting without a masked LM: word replacement is off (p_replace=%g ignored); give a "
                    "BertForMaskedLM folder such as outputs/mlm_tiny/latest/hf_model to replace words", p_replace)
        return None
    return masked_lm if isinstance(masked_lm, MaskedLM) else MaskedLM.from_pretrained(masked_lm)


def _predictions(masked_lm: MaskedLM, words: list[list[list[str]]],
                 plans: list[list[list[Plan]]]) -> dict[tuple[int, int, int], list[str]]:
    """The masked LM's predictions for every (example, text, word) that some copy replaces."""
    wanted = sorted({(example, text, position)
                     for example, example_plans in enumerate(plans) for plan in example_plans
                     for text, (operations, _) in enumerate(plan)
                     for position, operation in enumerate(operations) if isinstance(operation, float)})
    predicted = masked_lm.predict([words[example][text] for example, text, _ in wanted],
                                  [position for *_, position in wanted])
    return dict(zip(wanted, predicted))


def _unique_copies(index: int, example: list[list[str]], plans: list[list[Plan]],
                   predictions: dict[tuple[int, int, int], list[str]]) -> list[Example]:
    seen = {tuple(" ".join(words) for words in example)}
    copies = []
    for plan in plans:
        copy = tuple(_render(words, *plan[text], lambda position: predictions.get((index, text, position), ()))
                     for text, words in enumerate(example))
        if copy not in seen:
            seen.add(copy)
            copies.append(copy)
    return copies


def _render(words: list[str], operations: list, ngram: tuple[int, int] | None,
            predictions_at: Callable[[int], Sequence[str]]) -> str:
    augmented = []
    for position, (word, operation) in enumerate(zip(words, operations)):
        if operation is None:
            augmented.append(word)
        elif operation == MASK:
            augmented.append(MASK)
        else:
            candidates = predictions_at(position)
            augmented.append(_match_case(word, candidates[int(operation * len(candidates))]) if candidates else word)
    if ngram is not None:
        augmented = augmented[ngram[0]:ngram[1]]
    return " ".join(augmented)


def _is_whole_word(token: str) -> bool:
    """A vocabulary entry that can stand for a word: not special or [unused…], not a "##" piece, not punctuation."""
    return (token not in SPECIAL_TOKENS and not (token.startswith("[") and token.endswith("]"))
            and not token.startswith("##") and any(character.isalnum() for character in token))


def _match_case(word: str, prediction: str) -> str:
    """An uncased model's prediction written like the word it replaces (Title, UPPER)."""
    if not prediction.islower():
        return prediction
    if len(word) > 1 and word.isupper():
        return prediction.upper()
    return prediction[:1].upper() + prediction[1:] if word[:1].isupper() else prediction


TextColumns = Annotated[str | Sequence[str], Items(1, 2, says="1 or 2 column names (a text, or a sentence pair)")]


@checks_arguments
def read_unlabelled(path: str | os.PathLike, text_columns: TextColumns = ("sentence",), *,
                    split: str = "train") -> list[Example]:
    """In-domain text without labels, one example per row: a .txt/.tsv file (one example per line,
    the two texts of a pair separated by a tab, blank lines skipped) or a dataset (a parquet, JSON or
    CSV file, a folder of split files, a saved dataset or a hub id) whose `split` has `text_columns`."""
    columns = [text_columns] if isinstance(text_columns, str) else list(text_columns)
    if Path(path).suffix in TEXT_FILE_SUFFIXES:
        return _read_text_file(Path(path).expanduser(), columns)
    splits = load_dataset_source(str(path), what="unlabelled text")
    if split not in splits:
        raise DataError(f"unlabelled text {str(path)!r} has no split {split!r}; available splits: {sorted(splits)}")
    name = f"split {split!r} of {path}"
    require_columns(splits[split], columns, name)
    values = [list(splits[split][column]) for column in columns]
    for column, texts in zip(columns, values):
        bad = next((row for row, text in enumerate(texts) if not isinstance(text, str)), None)
        if bad is not None:
            raise DataError(f"column {column!r} of {name} holds {texts[bad]!r} at row {bad}; expected text")
    return list(zip(*values))


def _read_text_file(file: Path, columns: list[str]) -> list[Example]:
    if not file.is_file():
        raise DataError(f"unlabelled text file {file} does not exist")
    examples = []
    for number, line in enumerate(read_text_lines(file)["text"], start=1):
        if not line.strip():
            continue
        texts = tuple(line.split("\t"))
        if len(texts) != len(columns):
            raise DataError(f"{file}, line {number}: {len(texts)} tab-separated text(s), expected {len(columns)} "
                            f"({', '.join(columns)})")
        examples.append(texts)
    if not examples:
        raise DataError(f"unlabelled text file {file} has only blank lines; expected one example per line")
    return examples
