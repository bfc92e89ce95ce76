"""Property-based tests of the loaders of untrusted input: for every generated config.json, vocab.txt,
safetensors header and command line, bertlab either loads it or raises one BertlabError whose
message is one line — never another exception, never a hang, and never an allocation the machine
cannot hold."""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import pytest
from hydra import compose
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bertlab.checkpoint.dispatch import read_config, read_weights
from bertlab.config import BertConfig, _memory_bytes
from bertlab.errors import BertlabError
from bertlab.tokenizer import load_tokenizer
from bertlab.training.checks.before_run import check
from bertlab.training.checks.keys import declarations
from bertlab.training.launch.app import user_error
from bertlab.training.launch.config_tree import SCHEMAS
from tests.training.shipped_configs import composed_trees

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6)
CONFIG_KEYS = [*BertConfig.__dataclass_fields__, "model_type"]


def assert_one_line(error: BertlabError) -> None:
    assert str(error) and "\n" not in str(error), repr(str(error))
    event(f"one-line {type(error).__name__}")


def folder_with(name: str, content: bytes) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="fuzz-"))
    (directory / name).write_bytes(content)
    return directory


@FUZZ
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON_VALUES | st.integers(0, 10**7), max_size=8)
       | JSON_VALUES)
def test_config_json_loads_or_is_one_line_error_within_memory(values):
    directory = folder_with("config.json", json.dumps(values).encode())
    try:
        config = read_config(directory)
    except BertlabError as error:
        assert_one_line(error)
        return
    assert 4 * config.parameter_count() <= _memory_bytes()
    event("loaded")


@FUZZ
@given(st.lists(st.text(max_size=10), max_size=30), st.booleans())
def test_vocab_txt_loads_or_is_one_line_error(tokens, with_specials):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] if with_specials else []
    directory = folder_with("vocab.txt", "\n".join(specials + tokens).encode("utf-8", "surrogatepass"))
    try:
        tokenizer = load_tokenizer(directory)
    except BertlabError as error:
        assert_one_line(error)
        return
    tokenizer.encode("a fuzzed sentence")
    event("loaded")


TENSOR_SPECS = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "F16", "BF16", "I64", "BOOL", "X9"]) | st.text(max_size=4),
    "shape": st.lists(st.integers(-3, 2**40), max_size=3),
    "data_offsets": st.lists(st.integers(-3, 2**40), min_size=0, max_size=3),
})


@FUZZ
@given(st.dictionaries(st.text(min_size=1, max_size=8), TENSOR_SPECS | JSON_VALUES, max_size=3),
       st.binary(max_size=256), st.integers(-8, 2**40) | st.none())
def test_safetensors_header_loads_or_is_one_line_error(header, data, declared_length):
    text = json.dumps(header).encode()
    length = len(text) if declared_length is None else declared_length
    content = struct.pack("<q", length) + text + data
    directory = folder_with("model.safetensors", content)
    try:
        read_weights(directory)
        event("loaded")
    except BertlabError as error:
        assert_one_line(error)


def ranged_keys() -> list[str]:
    """The keys of the shipped configs with a declared range or choices (bertlab.value_rules), but the callbacks'."""
    keys = {declaration.key for name, tree in composed_trees() for declaration in declarations(tree, SCHEMAS[name])
            if declaration.rules}
    return sorted(key for key in keys if not key.startswith("callbacks."))


# Drawn inside the test, where the config module is initialised.
OVERRIDE_KEYS = st.deferred(lambda: st.sampled_from([*ranged_keys(), "model.init_from", "resume"]))
OVERRIDE_VALUES = (st.integers(-10**12, 10**12).map(str) | st.floats(allow_nan=False).map(repr)
                   | st.sampled_from(["abc", "null", "true", "[1,2]", "{a: 1}", "''", "-0.5", "1e400", "/no/such"]))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(OVERRIDE_KEYS, OVERRIDE_VALUES), min_size=1, max_size=3),
       st.sampled_from(["train", "fine_tune"]))
def test_command_line_overrides_compose_or_are_one_line_error(config_module, tmp_path, overrides, command):
    lines = [f"{key}={value}" for key, value in overrides] + [f"hydra.run.dir={tmp_path}/run"]
    try:
        config = compose(command, overrides=lines, return_hydra_config=True)
        check(config, config.hydra.run.dir, new_run=True)
        event("accepted")
    except BertlabError as error:
        assert_one_line(error)
    except Exception as error:  # Hydra's and OmegaConf's own errors: what `launch` reports for them
        reported = user_error(error)
        assert reported is not None, f"{lines}: {type(error).__name__}: {error}"
        assert_one_line(reported)
