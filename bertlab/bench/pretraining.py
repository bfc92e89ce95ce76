"""MLM pretraining step throughput: bertlab's PretrainingModule vs transformers' BertForMaskedLM.

Both train on the same batch of full-length sequences (as run_mlm.py's group_texts packs text:
[CLS] … [SEP], no padding) of random word-piece ids of the bert-base-uncased vocabulary. Each
masks it anew every step: bertlab inside its step (mask_tokens), transformers in
DataCollatorForLanguageModeling, which run_mlm.py calls on the critical path of every step.
A third row, "bertlab, user loop", is bertlab's BertForMaskedLM in transformers' loop and on its
collator's batches: the plain `model(**batch).loss.backward()` of a user's own loop (never compiled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
import transformers
from torch.utils.data import DataLoader

from bertlab.bench.clock import Measurement, interleave
from bertlab.bench.report import Result
from bertlab.bench.training import TransformersLoop, bertlab_optimizer, fit_steps
from bertlab.config import BertConfig
from bertlab.lit.masking import predicted_per_batch
from bertlab.lit.pretraining import PretrainingModule
from bertlab.lit.throughput import mlm_training_flops
from bertlab.model import BertForMaskedLM
from bertlab.training.run.model_group import model_preset

HF_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "pad_token_id", "hidden_dropout_prob", "attention_probs_dropout_prob")


# How a compiled recipe trains (mlm_base_gpu): static masking gives the compiler one shape per batch shape.
COMPILED = {"compile": True, "static_masking": True}
# bertlab's fast paths that are switches, measured against its defaults: (config changes, module options)
FAST_PATH_SWITCHES = {
    "fused_qkv off": ({"fused_qkv": False}, {}),
    "fp32 residual stream": ({"low_precision_residual": False}, {}),
    "torch.compile": ({}, COMPILED),
    "foreach AdamW": ({}, {"optimizer": partial(torch.optim.AdamW, foreach=True)}),
    "CUDA graphs": ({}, {**COMPILED, "compile_mode": "reduce-overhead"}),
}
USER_LOOP = "bertlab, user loop"
AUTOCAST_ONLY = ("fp32 residual stream",)  # the same model as the default outside autocast: measured in bf16 only
CUDA_ONLY = ("CUDA graphs",)  # torch.compile leaves CPU code as it is


@dataclass(frozen=True)
class MlmSetup:
    """What both systems share in one comparison."""
    case: str
    config: BertConfig
    batch_size: int
    length: int
    tokenizer_dir: str  # a bert-base-uncased-vocabulary tokenizer: special token ids and HF's collator
    device: torch.device
    precision: str  # "fp32" | "bf16"
    steps: int
    warmup: int
    seed: int = 0
    compile: bool = False  # bertlab's arms compiled, as COMPILED


def bertlab_options(setup: MlmSetup, **options) -> dict:
    """PretrainingModule arguments of a bertlab arm: the setup's compilation, then `options`."""
    return {**(COMPILED if setup.compile else {}), **options}


def bertlab_predicted_positions(setup: MlmSetup, options: dict) -> float:
    """Positions bertlab's sparse head predicts per batch, with the module's default 15% masking."""
    return predicted_per_batch(setup.batch_size, setup.length, 0.15, options.get("static_masking", False))


def mlm_config(size: str, vocab_size: int = 30522, dropout: float | None = None, **switches) -> BertConfig:
    """The size's preset; `dropout`, if given, in place of its hidden and attention dropout."""
    if dropout is not None:
        switches = {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout, **switches}
    return BertConfig.from_dict({**model_preset(size), "vocab_size": vocab_size, **switches})


def mlm_examples(setup: MlmSetup, special_ids: dict[str, int]) -> list[dict[str, list[int]]]:
    """Rows as run_mlm.py's tokenize + group_texts leave them."""
    generator = torch.Generator().manual_seed(setup.seed)
    first_word_id = max(special_ids.values()) + 1
    ids = torch.randint(first_word_id, setup.config.vocab_size, (setup.batch_size, setup.length),
                        generator=generator)
    ids[:, 0], ids[:, -1] = special_ids["cls"], special_ids["sep"]
    special = [1] + [0] * (setup.length - 2) + [1]
    return [{"input_ids": row, "token_type_ids": [0] * setup.length, "attention_mask": [1] * setup.length,
             "special_tokens_mask": special} for row in ids.tolist()]


def bertlab_batch(examples: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    """The same rows as a PretrainingDataModule batch."""
    batch = {key: torch.tensor([row[key] for row in examples]) for key in examples[0]}
    batch["special_tokens_mask"] = batch["special_tokens_mask"].bool()
    return batch


def bertlab_module(setup: MlmSetup, special_ids: dict[str, int], *, optimizer: partial | None = None,
                   **module_options) -> PretrainingModule:
    """bertlab's arm: `module_options` are more PretrainingModule arguments (compile, mlm_probability, dropout, …)."""
    return PretrainingModule(setup.config, mask_token_id=special_ids["mask"], optimizer=bertlab_optimizer(optimizer),
                             special_token_ids=list(special_ids.values()), seed=setup.seed,
                             **bertlab_options(setup, **module_options))


def bertlab_measurement(setup: MlmSetup, special_ids: dict[str, int], *, optimizer: partial | None = None,
                        **module_options) -> Measurement:
    """`module_options`: as `bertlab_module`'s."""
    module = bertlab_module(setup, special_ids, optimizer=optimizer, **module_options)
    batch = bertlab_batch(mlm_examples(setup, special_ids))
    batches = [batch] * (setup.warmup + setup.steps)

    def measure() -> float:
        clock = fit_steps(module, setup.device, setup.precision, setup.steps, setup.warmup,
                          train_dataloaders=DataLoader(batches, batch_size=None))
        return clock.seconds

    return measure


def collator_batches(setup: MlmSetup, special_ids: dict[str, int]) -> Callable[[], dict]:
    """The next batch as run_mlm.py's collator makes it."""
    tokenizer = transformers.BertTokenizerFast.from_pretrained(setup.tokenizer_dir)
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    examples = mlm_examples(setup, special_ids)
    return lambda: collator(examples)


def transformers_loop(setup: MlmSetup, special_ids: dict[str, int]) -> tuple[TransformersLoop, Callable[[], dict]]:
    """Stock BertForMaskedLM in its training loop, and the collator's batches."""
    torch.manual_seed(setup.seed)
    config = transformers.BertConfig(**{name: getattr(setup.config, name) for name in HF_FIELDS})
    loop = TransformersLoop(transformers.BertForMaskedLM(config), setup.device, setup.precision)
    return loop, collator_batches(setup, special_ids)


def transformers_measurement(setup: MlmSetup, special_ids: dict[str, int]) -> Measurement:
    loop, next_batch = transformers_loop(setup, special_ids)
    return lambda: loop.run(next_batch, setup.steps, setup.warmup)


def user_loop_measurement(setup: MlmSetup, special_ids: dict[str, int]) -> Measurement:
    """bertlab's BertForMaskedLM where transformers' stands: its plain call, `model(**batch).loss`, in the
    same loop on the same batches. Built at its first measurement, like the module's arm."""
    arm: list[tuple[TransformersLoop, Callable[[], dict]]] = []

    def measure() -> float:
        if not arm:
            torch.manual_seed(setup.seed)
            arm.append((TransformersLoop(BertForMaskedLM(setup.config), setup.device, setup.precision),
                        collator_batches(setup, special_ids)))
        loop, next_batch = arm[0]
        return loop.run(next_batch, setup.steps, setup.warmup)

    return measure


def compare(setup: MlmSetup, special_ids: dict[str, int], repeats: int, *, small_vocab: int | None = None,
            fast_paths: tuple[str, ...] = ()) -> list[Result]:
    """transformers, bertlab's module and bertlab's model in the user's loop, plus bertlab with a
    recipe-sized vocabulary and with each of `fast_paths` (names in FAST_PATH_SWITCHES) switched,
    measured in turns."""
    configs = {"transformers": setup.config, "bertlab": setup.config, USER_LOOP: setup.config}
    options = {"transformers": {}, "bertlab": bertlab_options(setup), USER_LOOP: {}}
    measurements = {"transformers": transformers_measurement(setup, special_ids),
                    "bertlab": bertlab_measurement(setup, special_ids),
                    USER_LOOP: user_loop_measurement(setup, special_ids)}
    if small_vocab is not None:
        name, config = f"bertlab, vocab {small_vocab}", replace(setup.config, vocab_size=small_vocab)
        configs[name], options[name] = config, bertlab_options(setup)
        measurements[name] = bertlab_measurement(replace(setup, config=config), special_ids)
    for fast_path in fast_paths:
        if (setup.precision == "fp32" and fast_path in AUTOCAST_ONLY
                or setup.device.type != "cuda" and fast_path in CUDA_ONLY):
            continue
        config_changes, switch = FAST_PATH_SWITCHES[fast_path]
        name, config = f"bertlab, {fast_path}", replace(setup.config, **config_changes)
        configs[name], options[name] = config, bertlab_options(setup, **switch)
        measurements[name] = bertlab_measurement(replace(setup, config=config), special_ids, **switch)
    timings = interleave(measurements, repeats)
    tokens = setup.batch_size * setup.length
    compiled = "; bertlab's module compiled, with static masking" if setup.compile else ""
    setting = (f"batch {setup.batch_size} × {setup.length} tokens, vocab {setup.config.vocab_size} unless named, "
               f"dropout {setup.config.hidden_dropout_prob:g}, AdamW, clipping 1.0; "
               f"transformers = stock BertForMaskedLM as run_mlm.py trains it; {USER_LOOP} = bertlab's "
               f"BertForMaskedLM in that loop, its plain model(**batch).loss{compiled}")
    results = []
    for name, timing in timings.items():
        predicted = tokens if name == "transformers" else bertlab_predicted_positions(setup, options[name])
        flops = mlm_training_flops(configs[name], setup.batch_size, setup.length, predicted)
        results.append(Result("pretraining", setup.case, setting, setup.precision, name, "tokens/s",
                              tokens * setup.steps, timing, baseline="transformers", steps=setup.steps,
                              flops=flops * setup.steps))
    return results
