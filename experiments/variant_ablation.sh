#!/usr/bin/env bash
# The ablation on the standard objective (issue 77): mlm_tiny_wiki as its recipe stands (plain text) is the baseline,
# and each arm is a set of overrides on it, one design at a time, then all of them. Every run is pretrained for
# $STEPS steps, three seeds an arm, and judged first on the plain-text measure (the log of the last
# text/perplexity_ratio, pretraining runs as the unit: `bertlab compare BASELINE… -- ARM…`); the arms that measure
# moves then get the GLUE-small suite, judged by `bertlab compare` over their suites as groups (docs/statistics.md).
#
#   experiments/variant_ablation.sh ARM [SEED …]     pretrain ARM with each seed (default 0 1 2); once ARM and the
#                                                    baseline have every seed, judge it (`judge ARM`)
#   experiments/variant_ablation.sh judge ARM        ARM's runs against the baseline's on the plain-text measure
#   experiments/variant_ablation.sh moved            the arms whose plain-text verdict is better or worse
#   experiments/variant_ablation.sh glue ARM         the GLUE suite on each of ARM's runs and the baseline's (those
#                                                    not yet scored), then ARM's suites judged against the baseline's
#   experiments/variant_ablation.sh table            the table (experiments/ablation_table.py): $RECORDS/table.md, .csv
#
# Runs land in $RUNS/ARM_sSEED, suites in $RUNS/glue/ARM_sSEED and compare's reports in $RUNS/compare/, under the
# folder it is run from. What the table reads is recorded in $RECORDS: compare's compare.csv (each run's final
# figures) and verdict.csv of each judgement, and each suite's per-seed scores (so `bertlab compare` can judge them
# again from the CSVs). The older ablation on copied pairs: docs/results/log/variants.md.
set -euo pipefail

# The budget: every run of every arm trains this many steps (the recipe's 8,631 is one pass over the corpus), a full
# warm-up and decay. 1,200 keeps 8 arms × 3 seeds near two hours on 2 cores (~4.7 minutes a run with the data packed).
STEPS=1200
VALIDATE_EVERY=300   # divides STEPS, so that the last step is validated and the curves have five points
SEEDS="0 1 2"
RECIPE=mlm_tiny_wiki
RUNS=runs/ablation_plain
here=$(dirname "$0")
RECORDS=$here/../docs/results/suites/ablation_plain

declare -A ARMS=(
  [baseline]=""
  [rotary]="model.position_embedding_type=rotary"
  # BERT's learned positions, for a recipe whose default is rotary (an arm equal to the baseline is refused)
  [absolute_positions]="model.position_embedding_type=absolute"
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
# all of them with ModernBERT's window, since a ±32 window in the last layer broke STS-B (docs/variants.md)
ARMS[all_w128]=${ARMS[all]/local_attention_window=64/local_attention_window=128}
# An arm of the GLUE stage alone: all_w128's pretraining, fine-tuned through ModernBERT's classifier input ([CLS],
# dense, act, norm) instead of BERT's pooler; the classifier is built at fine-tuning, so its pretraining is all_w128's.
declare -A PRETRAINED_AS=([all_w128_cls]=all_w128)
declare -A FINE_TUNING=([all_w128_cls]="model.classifier_pooling=cls")
GLUE="lrs=sst2:2e-4,rte:3e-4,1e-3 trainer.val_check_interval=100"

(( STEPS % VALIDATE_EVERY == 0 )) || { echo "VALIDATE_EVERY=$VALIDATE_EVERY does not divide STEPS=$STEPS" >&2; exit 2; }

known() {
  [[ -v ARMS[$1] || -v PRETRAINED_AS[$1] ]] || {
    echo "unknown arm $1; one of: ${!ARMS[*]} ${!PRETRAINED_AS[*]}" >&2; exit 2; }
}

pretraining_arm() { echo "${PRETRAINED_AS[$1]:-$1}"; }

runs_of() {  # the run folders of an arm, one per seed
  local seed
  for seed in $SEEDS; do echo "$RUNS/$(pretraining_arm "$1")_s$seed"; done
}

composed() {  # the config an arm's overrides compose
  # shellcheck disable=SC2086  # the overrides are words
  python -m bertlab train +recipe=$RECIPE trainer.max_steps=$STEPS ${ARMS[$1]} --cfg job
}

refuse_the_baseline_again() {  # an arm that composes the recipe's defaults would judge the baseline against itself
  [[ $1 == baseline ]] && return
  if [[ $(composed "$1") == "$(composed baseline)" ]]; then
    echo "arm $1 (${ARMS[$1]}) is $RECIPE's defaults: it is the baseline" >&2
    exit 2
  fi
}

pretrain() {
  local arm=$1 seed
  shift
  for seed in ${@:-$SEEDS}; do
    # shellcheck disable=SC2086
    python -m bertlab train +recipe=$RECIPE seed="$seed" trainer.max_steps=$STEPS \
      trainer.val_check_interval=$VALIDATE_EVERY ${ARMS[$arm]} hydra.run.dir="$RUNS/${arm}_s$seed" resume=auto
  done
}

finished() {  # every run of the arm has its final metrics
  local run
  for run in $(runs_of "$1"); do [[ -f $run/metrics.json && -d $run/hf_model ]] || return 1; done
}

judge() {
  local arm=$1 out=$RUNS/compare/${1}_text
  # shellcheck disable=SC2046  # one folder a word
  python -m bertlab compare --output "$out" --overwrite $(runs_of baseline) -- $(runs_of "$arm")
  mkdir -p "$RECORDS"
  cp "$out/compare.csv" "$RECORDS/${arm}_text.csv"
  cp "$out/verdict.csv" "$RECORDS/${arm}_text_verdict.csv"
}

suites_of() {  # the GLUE suite folders of an arm, one per pretraining seed
  local seed
  for seed in $SEEDS; do echo "$RUNS/glue/${1}_s$seed"; done
}

score_on_glue() {  # the suite of each run of ARM not yet scored, its per-seed scores recorded
  local arm=$1 seed suite
  mkdir -p "$RECORDS"
  for seed in $SEEDS; do
    suite=$RUNS/glue/${arm}_s$seed
    if [[ ! -f $suite/glue_seeds.csv ]]; then
      # shellcheck disable=SC2086
      python -m bertlab glue "$RUNS/$(pretraining_arm "$arm")_s$seed" $GLUE ${FINE_TUNING[$arm]:-} \
        hydra.sweep.dir="$suite"
    fi
    cp "$suite/glue_seeds.csv" "$RECORDS/${arm}_s${seed}_glue_seeds.csv"
  done
}

judge_on_glue() {
  local arm=$1 out=$RUNS/compare/${1}_glue
  score_on_glue baseline
  score_on_glue "$arm"
  # shellcheck disable=SC2046  # one folder a word
  python -m bertlab compare --output "$out" --overwrite $(suites_of baseline) -- $(suites_of "$arm")
  cp "$out/compare.csv" "$RECORDS/${arm}_glue.csv"
  cp "$out/verdict.csv" "$RECORDS/${arm}_glue_verdict.csv"
}

command=${1:?"an arm (${!ARMS[*]}), or judge ARM, moved, glue ARM, table"}
case $command in
  table) exec python "$here"/ablation_table.py table "$RECORDS" ;;
  moved) exec python "$here"/ablation_table.py moved "$RECORDS" ;;
  judge) arm=${2:?"judge ARM"}; known "$arm"; judge "$(pretraining_arm "$arm")" ;;
  glue) arm=${2:?"glue ARM"}; known "$arm"
        [[ $arm != baseline ]] || { echo "glue ARM: an arm, judged against the baseline's suites" >&2; exit 2; }
        judge_on_glue "$arm" ;;
  *) arm=$command; known "$arm"
     [[ -v ARMS[$arm] ]] || {
       echo "$arm is pretrained as ${PRETRAINED_AS[$arm]}: run that arm, then glue $arm" >&2; exit 2; }
     refuse_the_baseline_again "$arm"
     shift
     pretrain "$arm" "$@"
     if [[ $arm != baseline ]] && finished baseline && finished "$arm"; then judge "$arm"; fi ;;
esac
