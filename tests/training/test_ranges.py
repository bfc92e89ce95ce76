"""The declared ranges (bertlab.training.ranges): every numeric value of every shipped config — each
option of each group, each recipe — has a rule, every rule names a key that exists, and the rules
refuse what they should."""

from __future__ import annotations

import importlib.resources

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from bertlab.recipe_files import recipe_names
from bertlab.errors import ConfigError
from bertlab.training.app import register_configs
from bertlab.training.ranges import RULES, check_ranges, violation

# Keys whose strings come from a fixed set: each must have its choices declared.
ENUMERATED = ("monitor_mode", "model.hidden_act", "model.position_embedding_type", "model.attn_implementation",
              "scheduler.schedule", "trainer.accelerator", "trainer.precision", "task.compile_mode")
NOT_VALUES = ("_target_", "_partial_")


def group_options(group: str) -> list[str]:
    files = importlib.resources.files("bertlab.conf").joinpath(group).iterdir()
    return sorted(entry.name[:-5] for entry in files if entry.name.endswith(".yaml"))


def compositions() -> list[tuple[str, list[str]]]:
    found = [(name, [f"{group}={option}"]) for name in ("train", "fine_tune")
             for group in ("model", "task", "scheduler", "trainer", "data", "callbacks", "optimizer")
             for option in group_options(group)]
    found += [("train" if recipe.startswith("mlm") else "fine_tune", [f"+recipe={recipe}"]) for recipe in recipe_names()]
    return found


def numeric_keys(node, prefix: str = "") -> set[str]:
    if isinstance(node, dict):
        return {key for name, value in node.items() if name not in NOT_VALUES
                for key in numeric_keys(value, f"{prefix}{name}.")}
    is_number = isinstance(node, (int, float)) and not isinstance(node, bool)
    return {prefix[:-1]} if is_number else set()


@pytest.fixture(scope="module")
def composed() -> list[dict]:
    register_configs()
    GlobalHydra.instance().clear()
    configs = []
    with initialize_config_module("bertlab.conf", version_base="1.3"):
        for name, overrides in compositions():
            try:
                cfg = compose(name, overrides=overrides)
            except Exception:  # an option meant for the other command (a classification data set in train)
                continue
            configs.append(OmegaConf.to_container(cfg, resolve=False))
    return configs


@pytest.mark.slow
def test_every_numeric_value_of_every_shipped_config_has_a_rule(composed):
    numeric = set().union(*(numeric_keys(cfg) for cfg in composed))
    assert len(composed) > 20 and len(numeric) > 30
    assert sorted(numeric - set(RULES)) == []


def test_enumerated_keys_declare_their_choices():
    assert all(isinstance(RULES[key], tuple) for key in ENUMERATED)


@pytest.mark.slow
def test_every_rule_names_a_key_of_a_shipped_config(composed):
    def has(cfg: dict, key: str) -> bool:
        node = cfg
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    # keys that are absent or null by default are declared all the same: their values are checked when set
    optional = {"scheduler.warmup_steps", "trainer.check_val_every_n_epoch", "callbacks.finite_loss.check_every_n_steps"}
    assert sorted(key for key in RULES if key not in optional and not any(has(cfg, key) for cfg in composed)) == []


@pytest.mark.parametrize("rule, value, problem", [
    ("(0, inf)", 0, "must be in (0, inf)"), ("(0, inf)", 1e38, None), ("[0, 1)", 1.0, "must be in [0, 1)"),
    ("[0, 1)", 0, None), ("[-1, inf)", -2, "must be in [-1, inf)"), ("[1, inf)", float("nan"), "must be in [1, inf)"),
    (("min", "max"), "mean", "must be one of min, max"), (("min", "max"), "max", None),
    ("(0, 1)", "abc", "must be a number in (0, 1)"), ("[1, inf)", True, "must be a number in [1, inf)"),
])
def test_a_rule_refuses_what_lies_outside_it(rule, value, problem):
    assert violation(rule, value) == problem


def test_the_message_names_key_value_and_rule():
    with pytest.raises(ConfigError, match=r"^optimizer.lr=-0.5: must be in \(0, inf\)$"):
        check_ranges({"seed": 3, "optimizer.lr": -0.5})
    with pytest.raises(ConfigError, match=r"^optimizer.lr='abc': must be a number in \(0, inf\)$"):
        check_ranges({"optimizer.lr": "abc"})
    check_ranges({"optimizer.lr": None, "trainer.devices": "auto", "trainer.val_check_interval": "00:00:30:00"})
