"""`python -m bertlab <command> [arguments…]`: a table of subcommands.

Hydra commands (train, prepare-data, fine-tune) take Hydra overrides; the others take ordinary options.
Each command's module is imported only when it runs: `--help` and a mistyped command answer at once, without
torch and Lightning.
Every error ends the command with one `bertlab: error: …` line on stderr: exit status 2 for a
malformed command line, 1 for the rest. BERTLAB_DEBUG=1 shows the traceback instead.
"""

from __future__ import annotations

import importlib
import os
import sys

from bertlab.allocator import keep_freed_memory
from bertlab.errors import BertlabError, UsageError
from bertlab.recipe_files import recipe_names

# command → one-line help; its code is command_module(command).main(arguments, prog)
COMMANDS = {
    "train": "pretrain a BERT: masked LM (optional NSP) on a corpus, or a teacher's sentence embeddings",
    "fine-tune": "fine-tune a sequence classifier from a checkpoint or from scratch",
    "evaluate": "metrics of a fine-tuned checkpoint on a split or a file",
    "glue": "the GLUE suite (tasks × seeds) for a checkpoint, and its table",
    "predict": "labels and probabilities for sentences, a text file or a csv/jsonl column",
    "tokenize": "the tokenizer's stages on a sentence or pair: normalised text, basic tokens, WordPiece pieces, ids",
    "compare": "runs or GLUE suites side by side: differing config keys, metrics, curves",
    "attention": "attention maps (layers × heads) of a sentence or pair, as PNGs",
    "heads": "head importance of a classifier, the metric against heads pruned, a pruned export",
    "shrink": "a smaller BERT initialised from a larger checkpoint by weight selection (layers, heads, widths)",
    "summarize": "table of final metrics (per run, mean ± std) of a sweep folder",
    "prepare-data": "build a train config's pretraining data into data.cache_dir, once, before a multi-node train",
    "bench": "benchmark bertlab against Hugging Face transformers on this machine",
}


def command_module(command: str) -> str:
    return f"bertlab.commands.{command.replace('-', '_')}"


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m bertlab <command> [arguments…]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    lines += ["", "recipes (train/fine-tune +recipe=NAME):", "  " + ", ".join(recipe_names()), "",
              "examples:",
              "  python -m bertlab train +recipe=mlm_tiny trainer.max_steps=200 seed=7",
              "  python -m bertlab fine-tune +recipe=sst2",
              "  python -m bertlab train --help        (Hydra's help: config groups and options)",
              "  python -m bertlab train +recipe=mlm_tiny --cfg job   (print the resolved config)"]
    return "\n".join(lines)


def fail(message: str, status: int = 2) -> None:
    print(f"bertlab: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return
    command, arguments = argv[0], argv[1:]
    if command not in COMMANDS:
        fail(f"unknown command {command!r}; expected one of: {', '.join(COMMANDS)} "
             f"(python -m bertlab --help)")
    if command != "bench":  # the benchmark measures transformers on the allocator its users have
        keep_freed_memory()
    try:
        importlib.import_module(command_module(command)).main(arguments, prog=f"bertlab {command}")
    except Exception as error:
        if os.environ.get("BERTLAB_DEBUG"):
            raise
        if isinstance(error, BertlabError):
            fail(str(error), status=2 if isinstance(error, UsageError) else 1)
        if isinstance(error, OSError) and error.filename:  # a folder that cannot be created or read
            fail(f"{error.filename}: {error.strerror or error}; check the path and its permissions, or choose "
                 f"another (see {command} --help)", status=1)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        fail(f"unexpected {type(error).__name__}{': ' + reason if reason else ''} (a bug in bertlab; "
             f"BERTLAB_DEBUG=1 shows where)", status=1)
