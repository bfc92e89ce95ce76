"""A value refused where it enters (bertlab.argument_checks): every argument of the package's API that declares a
rule refuses a value outside it when Python code passes one, in one line that names the taker, the argument and
the value."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from typing import Any

import pytest

import bertlab
from bertlab.argument_checks import (Entries, Items, Shares, SomeOf, Tokens, argument_annotations, check_between,
                                     check_taken_together, checks_arguments, format_value)
from bertlab.config import BertConfig
from bertlab.data.augment import augment
from bertlab.errors import ConfigError
from bertlab.lit.pretraining import PretrainingModule
from bertlab.value_rules import OneOf, base_types, rules


def ruled_arguments() -> list[tuple[Any, str, tuple]]:
    """(taker, argument, its rules) for each argument with rules of a function or class of the package. Left out:
    Hydra's schemas (the checks before a run read them, nobody calls them) and the modelling code an export
    folder carries (bertlab.checkpoint.remote_code, imported from that folder)."""
    found = []
    for module_info in pkgutil.walk_packages(bertlab.__path__, "bertlab."):
        if module_info.name.endswith("__main__") or module_info.name.startswith(("bertlab.training.launch.config_tree",
                                                                                  "bertlab.checkpoint.remote_code")):
            continue
        module = importlib.import_module(module_info.name)
        for item in vars(module).values():
            if getattr(item, "__module__", None) != module.__name__:
                continue
            function = vars(item).get("__init__") if inspect.isclass(item) else item
            if not inspect.isfunction(function):
                continue
            found += [(item, name, rules(annotation)) for name, annotation in argument_annotations(function).items()
                      if rules(annotation)]
    return found


def outside(rule) -> Any:
    if isinstance(rule, OneOf):
        return "surely-not-a-choice"
    if isinstance(rule, SomeOf):
        return [rule[0], "surely-not-a-choice"]
    if isinstance(rule, Entries):
        return [{"surely-not-a-key": 1}]
    if isinstance(rule, Tokens):
        return ["surely not a token"]
    if isinstance(rule, Items):
        return ["surely-not-an-item"] * (rule.most + 1)
    low, high = (float(bound) for bound in rule.bounds[1:-1].split(","))
    return low - 1 if math.isfinite(low) else high + 1


RULED = [(taker, name, rules_) for taker, name, rules_ in ruled_arguments()
         if taker is not BertConfig]  # it words its refusals as a model config: test_config


def test_the_package_declares_rules_on_the_arguments_of_its_api():
    takers = {taker.__name__ for taker, _, _ in RULED}
    assert {"warmup_schedule", "PretrainingModule", "ClassificationDataModule", "TransferSettings"} <= takers


@pytest.mark.parametrize("taker, name, rules_", RULED, ids=[f"{taker.__name__}.{name}" for taker, name, _ in RULED])
def test_every_ruled_argument_is_refused_when_python_code_passes_a_value_outside_its_rule(taker, name, rules_):
    """The checks before a run refuse a bad config value; the same value passed by a user's own code is
    refused the same way, before the taker runs (its other arguments are not even given)."""
    value = outside(rules_[0])
    with pytest.raises(ConfigError, match=re.escape(f"{taker.__qualname__}({name}={format_value(value)}): must be")):
        taker(**{name: value})


NOT_NULL = [(taker, name) for taker, name, _ in RULED
            if type(None) not in base_types(argument_annotations(vars(taker).get("__init__", taker))[name])]


def test_some_ruled_arguments_admit_null_and_the_others_do_not():
    assert 0 < len(NOT_NULL) < len(RULED)
    assert (augment, "p_mask") in NOT_NULL and (PretrainingModule, "softmax_samples") not in NOT_NULL


@pytest.mark.parametrize("taker, name", NOT_NULL, ids=[f"{taker.__name__}.{name}" for taker, name in NOT_NULL])
def test_a_ruled_argument_whose_annotation_does_not_admit_null_refuses_it_in_one_line(taker, name):
    with pytest.raises(ConfigError, match=re.escape(f"{taker.__qualname__}({name}=None): must be")) as error:
        taker(**{name: None})
    assert "\n" not in str(error.value)


def test_the_shares_of_one_draw_add_up_to_at_most_one():
    shares = Shares(("p_mask", "p_replace"), "each word is masked, replaced or kept")
    check_between({"p_mask": 0.4, "p_replace": 0.6}, [shares])
    with pytest.raises(ConfigError, match=re.escape("p_mask + p_replace must be at most 1 (each word is masked, "
                                                    "replaced or kept), got 0.5 + 0.6")):
        check_between({"p_mask": 0.5, "p_replace": 0.6}, [shares])


def test_check_taken_together_judges_a_config_by_the_rules_a_taker_declares_and_leaves_run_arguments_to_the_call():
    def wider_than_model(arguments):
        return "width must exceed the model's" if arguments["width"] <= arguments["model_width"] else None

    def positive_width(arguments):
        return "width must be positive" if arguments["width"] <= 0 else None

    @checks_arguments(between=(wider_than_model, positive_width))
    class Taker:
        def __init__(self, model_width: int, width: int = 4):
            self.width = width

    check_taken_together(Taker, {"width": 8})  # model_width comes with the run: the first rule waits for the call
    with pytest.raises(ConfigError, match="^width must be positive$"):
        check_taken_together(Taker, {"width": -1})
    with pytest.raises(ConfigError, match="^width must exceed the model's$"):
        check_taken_together(Taker, {"width": 2, "model_width": 4})
    with pytest.raises(ConfigError, match="^width must exceed the model's$"):
        Taker(model_width=4, width=2)
