"""One walk over a config's keys (bertlab.training.checks.keys), one rule per key (bertlab.value_rules): every key of
every shipped config — each option of each group, each GLUE task, each recipe — is declared by what takes its value,
with exactly one rule; every number has a range; the rules refuse what they should, in one line; a key nothing reads
is reported before any value."""

from __future__ import annotations

import inspect

import pytest
from hydra import compose
from hydra.utils import get_object
from lightning.pytorch import Trainer
from omegaconf import OmegaConf

from bertlab.argument_checks import POSITIVE, check_rules
from bertlab.errors import ConfigError
from bertlab.training.checks import before_run
from bertlab.training.checks.before_run import check_combinations
from bertlab.training.checks.keys import (LIBRARY_ARGUMENTS, NOT_JUDGED, ConfigKeys, argument_declaration, check_type,
                                          declarations, overridden_keys)
from bertlab.training.launch.config_tree import SCHEMAS
from bertlab.value_rules import OneOf
from tests.training.shipped_configs import composed_trees

# Keys whose strings come from a fixed set: each must have its choices declared.
ENUMERATED = ("monitor_mode", "model.hidden_act", "model.position_embedding_type", "model.attn_implementation",
              "scheduler.schedule", "trainer.accelerator", "trainer.precision", "task.compile_mode")


@pytest.fixture(scope="module")
def composed(config_module) -> tuple[tuple[str, dict], ...]:
    return composed_trees()


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rule_problems(name: str, tree: dict) -> list[str]:
    """What is wrong with the declarations of the keys of a composed config: a key without a rule, a key
    with two."""
    problems = []
    for declaration in declarations(tree, SCHEMAS[name]):
        if declaration.annotation is NOT_JUDGED and not declaration.rules:
            problems.append(f"{declaration.key}: no rule (taken by {declaration.taker}: no type, no range)")
        elif len(declaration.rules) > 1:
            problems.append(f"{declaration.key}: {len(declaration.rules)} rules (taken by {declaration.taker}: "
                            f"{', '.join(map(repr, declaration.rules))})")
    return problems


@pytest.mark.slow
def test_every_key_of_every_shipped_config_has_exactly_one_rule(composed):
    assert len(composed) > 40
    assert sorted({problem for name, tree in composed for problem in rule_problems(name, tree)}) == []


@pytest.mark.slow
def test_every_number_of_every_shipped_config_has_a_range(composed):
    numbers = {(declaration.key, declaration.taker): declaration.rules for name, tree in composed
               for declaration in declarations(tree, SCHEMAS[name]) if is_number(declaration.value)}
    assert len(numbers) > 30
    assert sorted(f"{key}: a number without a range (taken by {taker})" for (key, taker), rules in numbers.items()
                  if not rules) == []


def test_enumerated_keys_declare_their_choices(config_module):
    found = {declaration.key: declaration.rules for name in SCHEMAS
             for declaration in declarations(OmegaConf.to_container(compose(name), resolve=False), SCHEMAS[name])}
    assert {key: found[key] for key in ENUMERATED
            if len(found[key]) != 1 or not isinstance(found[key][0], OneOf)} == {}


@pytest.mark.slow
def test_every_library_argument_is_an_argument_of_a_shipped_config_and_of_no_class_of_bertlab(composed):
    reached = set()
    for name, tree in composed:
        for declaration in declarations(tree, SCHEMAS[name]):
            if declaration.taker.startswith("argument "):
                taker = get_object(declaration.taker.rpartition(" of ")[2])
                argument = declaration.key.rpartition(".")[2]
                reached |= {(owner, argument) for owner in (inspect.getmro(taker) if inspect.isclass(taker) else ())}
    assert sorted(f"{owner.__name__}.{argument}" for owner, arguments in LIBRARY_ARGUMENTS.items()
                  for argument in arguments if (owner, argument) not in reached) == []
    assert [owner for owner in LIBRARY_ARGUMENTS if owner.__module__.startswith("bertlab")] == []


@pytest.mark.parametrize("target, key, value, message", [
    ("bertlab.lit.pretraining.PretrainingModule", "task.compile_mode", "fast",
     "task.compile_mode='fast': must be one of default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs"),
    ("bertlab.lit.pretraining.PretrainingModule", "task.dropout", 1.0, "task.dropout=1.0: must be in [0, 1)"),
    ("bertlab.lit.pretraining.PretrainingModule", "task.softmax_samples", 0,
     "task.softmax_samples=0: must be in [1, inf)"),
    ("bertlab.lit.distillation.DistillationModule", "task.alpha", 1.5, "task.alpha=1.5: must be in [0, 1]"),
    ("bertlab.lit.distillation.DistillationModule", "task.temperature", 0, "task.temperature=0: must be in (0, inf)"),
    ("bertlab.lit.distillation.DistillationModule", "task.dropout", 1.0, "task.dropout=1.0: must be in [0, 1)"),
    ("bertlab.lit.optim.warmup_schedule", "scheduler.schedule", "step",
     "scheduler.schedule='step': must be one of linear, cosine, constant"),
    ("lightning.pytorch.Trainer", "trainer.max_steps", "abc", "trainer.max_steps='abc': must be a number in [-1, inf)"),
])
def test_the_declaration_of_a_takers_argument_refuses_a_bad_value_in_one_line(target, key, value, message):
    _, rules = argument_declaration(target, key.rpartition(".")[2])
    with pytest.raises(ConfigError) as error:
        check_rules(key, value, rules)
    assert str(error.value) == message


def test_the_message_names_key_value_and_rule():
    with pytest.raises(ConfigError, match=r"^optimizer.lr=-0.5: must be in \(0, inf\)$"):
        check_rules("optimizer.lr", -0.5, (POSITIVE,))
    with pytest.raises(ConfigError, match=r"^optimizer.lr='abc': must be a number in \(0, inf\)$"):
        check_rules("optimizer.lr", "abc", (POSITIVE,))
    check_rules("optimizer.lr", None, (POSITIVE,))
    check_rules("trainer.devices", "auto", (LIBRARY_ARGUMENTS[Trainer]["devices"],))
    check_rules("trainer.val_check_interval", "00:00:30:00", (LIBRARY_ARGUMENTS[Trainer]["val_check_interval"],))


def test_overridden_keys_from_hydras_record():
    assert overridden_keys(["+recipe=x", "model.hidden_size=3", "~foo", "++a.b=1"]) == [
        "recipe", "model.hidden_size", "foo", "a.b"]


def declaration_of(config, key: str):
    return next(declaration for declaration in ConfigKeys.walk(config).declarations if declaration.key == key)


def test_values_are_checked_against_the_arguments_of_their_target(config_module):
    check_type(declaration_of(compose("train", overrides=["trainer.devices=auto"], return_hydra_config=True),
                              "trainer.devices"))
    with pytest.raises(ConfigError, match=r"trainer.max_steps='abc': expected int \(argument 'max_steps' of "
                                          r"lightning.pytorch.Trainer\), got str"):
        check_type(declaration_of(compose("train", overrides=["trainer.max_steps=abc"], return_hydra_config=True),
                                  "trainer.max_steps"))


def test_a_key_nothing_reads_is_reported_before_a_value_that_breaks_its_rule(config_module):
    config = compose("train", overrides=["optimizer.lr=-1", "+trainer.max_epoch=3"], return_hydra_config=True)
    keys = ConfigKeys.walk(config, overridden_keys(config.hydra.overrides.task))
    with pytest.raises(ConfigError, match="^unknown config key 'trainer.max_epoch'"):
        keys.check_known()
    with pytest.raises(ConfigError, match=r"^optimizer.lr=-1: must be in \(0, inf\)$"):
        keys.check_values()


def test_a_compile_mode_needs_compile(config_module):
    config = compose("train", overrides=["task.compile_mode=reduce-overhead"], return_hydra_config=True)
    with pytest.raises(ConfigError, match="^task.compile_mode=reduce-overhead needs task.compile=true$"):
        check_combinations(config, before_run.RULES)
    check_combinations(compose("train", overrides=["task.compile=true", "task.compile_mode=default"]),
                       before_run.RULES)


@pytest.mark.parametrize(("overrides", "message"), [
    (["task=mlm_nsp", "task.softmax_samples=64"], r"^task.softmax_samples=64 with task.nsp=true: the sampled softmax "),
    (["task.mask_replace_prob=0.9", "task.random_replace_prob=0.2"],
     r"^mask_replace_prob \+ random_replace_prob must be at most 1 \(a chosen token is masked, replaced or kept\), "
     r"got 0.9 \+ 0.2$"),
    (["task=general_distill", "task.softmax_samples=64"],
     r"^task.softmax_samples=64: GeneralDistillationModule trains with the full softmax"),
])
def test_the_rules_a_taker_declares_between_its_arguments_refuse_a_config_before_the_run(config_module, overrides,
                                                                                           message):
    config = compose("train", overrides=overrides, return_hydra_config=True)
    with pytest.raises(ConfigError, match=message):
        ConfigKeys.walk(config).check_taken_together()


def test_the_shipped_configs_pass_the_rules_their_takers_declare(config_module):
    ConfigKeys.walk(compose("fine_tune", overrides=["+recipe=sst2"], return_hydra_config=True)).check_taken_together()
    # TokenClassificationDataModule passes ClassificationDataModule a num_labels of its own: the base's rule waits.
    ConfigKeys.walk(compose("fine_tune", overrides=["+recipe=conll2003_scratch"], return_hydra_config=True)
                    ).check_taken_together()
    ConfigKeys.walk(compose("train", overrides=["+recipe=mlm_tiny_wiki"], return_hydra_config=True)
                    ).check_taken_together()
