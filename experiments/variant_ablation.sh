#!/usr/bin/env bash
# Issue 61's ablation: from mlm_tiny_wiki, one modern design at a time, then all of them, each pretrained with the
# recipe's fixed step count and judged by the GLUE suite, pretraining runs as the unit (docs/statistics.md).
#
#   experiments/variant_ablation.sh ARM [SEED …]    pretrain ARM with each seed (default 0 1 2), then its GLUE suite
#   experiments/variant_ablation.sh verdict ARM     judge ARM's suites against the baseline's three recorded runs
#   experiments/variant_ablation.sh table           every recorded arm in one table (experiments/ablation_table.py)
#
# ARM is one of the names below; `baseline` is the recipe as shipped, whose three runs are recorded in
# docs/results/suites/ (docs/results/pretraining.md), so it need not be run again. Runs land in
# runs/ablation/ARM_sSEED and their suites in runs/ablation/glue/ARM_sSEED, under the folder it is run from; each
# finished seed is recorded in docs/results/suites/ (ablation_ARM_sSEED.json and .csv), which `table` and `verdict`
# read. 31–50 minutes a seed on 2 cores with bf16 (pretraining, then the suite; docs/variants.md).
set -euo pipefail

declare -A ARMS=(
  [baseline]=""
  [rotary]="model.position_embedding_type=rotary"
  [pre_norm]="model.norm_position=pre"
  # GeGLU with two thirds of the width keeps the feed-forward's parameters (3·h·i against 2·h·i)
  [gated_ffn]="model.gated_ffn=true model.intermediate_size=344"
  [no_biases]="model.attention_bias=false model.ffn_bias=false model.norm_bias=false model.head_bias=false"
  [rms_norm]="model.norm_type=rms_norm model.norm_bias=false"
  [local_global]="model.local_attention_window=64 model.global_attention_every_n_layers=2"
  # ModernBERT's own window: ±64 positions, so a local layer's [CLS] reads half of a 128-token row
  [local_global_w128]="model.local_attention_window=128 model.global_attention_every_n_layers=2"
  [no_token_types]="model.type_vocab_size=0"
  # 4 layers of 116 (2 heads of 58, even for rotary) instead of 2 of 128: 2.61M parameters with 16,384 WordPieces
  # (BertForMaskedLM), BERT-Tiny's 2.59M
  [deep_narrow]="model.num_hidden_layers=4 model.hidden_size=116 model.intermediate_size=432"
  [all]="model.position_embedding_type=rotary model.norm_position=pre model.gated_ffn=true model.attention_bias=false
         model.ffn_bias=false model.norm_bias=false model.head_bias=false model.norm_type=rms_norm
         model.local_attention_window=64 model.global_attention_every_n_layers=2 model.type_vocab_size=0
         model.num_hidden_layers=4 model.hidden_size=116 model.intermediate_size=288"
)
# all of them with ModernBERT's window, since a ±32 window in the last layer breaks STS-B (docs/variants.md)
ARMS[all_w128]=${ARMS[all]/local_attention_window=64/local_attention_window=128}
# and with ModernBERT's classifier input ([CLS], dense, act, norm) instead of BERT's pooler: under a pre-norm RMSNorm
# encoder the pooler loses STS-B (docs/variants.md). The classifier is built at fine-tuning, so pretraining is all_w128's.
ARMS[all_w128_cls]="${ARMS[all_w128]} model.classifier_pooling=cls"
GLUE="lrs=sst2:2e-4,rte:3e-4,1e-3 trainer.val_check_interval=100"

here=$(dirname "$0")
arm=${1:?"an arm: ${!ARMS[*]}, or verdict ARM, or table"}
if [[ $arm == verdict ]]; then
  arm=${2:?"verdict ARM"}
  exec python "$here"/main_job_verdict.py --against-main-job "$here"/../docs/results/suites/ablation_"${arm}"_s*.csv
fi
[[ $arm == table ]] && exec python "$here"/ablation_table.py
[[ -v ARMS[$arm] ]] || { echo "unknown arm $arm; one of: ${!ARMS[*]}" >&2; exit 2; }
shift
for seed in "${@:-0 1 2}"; do
  for s in $seed; do
    run=runs/ablation/${arm}_s$s
    # shellcheck disable=SC2086  # the overrides are words
    python -m bertlab train +recipe=mlm_tiny_wiki seed="$s" ${ARMS[$arm]} hydra.run.dir="$run" resume=auto
    python -m bertlab glue "$run" $GLUE hydra.sweep.dir=runs/ablation/glue/${arm}_s$s
    python "$here"/ablation_table.py record "$run" runs/ablation/glue/${arm}_s$s
  done
done
