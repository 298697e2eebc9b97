#!/usr/bin/env bash
# Every config in templates/ passes `dtrun check`, and what check prints reads
# back to the same values. The DeepSpeed templates include Hugging Face-style
# ZeRO-2/ZeRO-3 JSONs full of "auto". Run from the source tree: template paths
# are relative to the current directory.
. "$(dirname "$0")/tap.sh"
cd "$DT_SRCDIR" || exit 1

for t in templates/*.yaml; do
    run "$t" 0 "$DTRUN" check "$t"
    printf '%s\n' "$out" >"$TMP/first.yaml"
    run "$t: output" 0 "$DTRUN" check "$TMP/first.yaml"
    same "$t: output reads back to the same values" "$(sed 's/ *#.*//' <<<"$out")" "$(sed 's/ *#.*//' "$TMP/first.yaml")"
done

for j in templates/deepspeed/*.json; do
    run "$j" 0 "$DTRUN" check templates/gpt-tiny.yaml compute.strategy=deepspeed compute.strategy_config.config="$j"
done

# what "auto" became, for the HF ZeRO-3 JSON on 4 ranks with accumulation 2
run "hf_zero3 on 4 ranks" 0 "$DTRUN" check templates/deepspeed-zero3.yaml compute.num_devices=4 \
    compute.gradient_accumulation_steps=2
has "hf_zero3: batch identity" "$out" "# deepspeed: templates/deepspeed/hf_zero3.json: zero stage 3; train_batch_size 64 = train_micro_batch_size_per_gpu 8 x gradient_accumulation_steps 2 x world 4; fp16 off, bf16 on; reduce_bucket_size 16384"
has "hf_zero3: bucket from n_embd^2" "$out" "bucket_cap_mb: 0.0625                        # auto: DeepSpeed reduce_bucket_size \"auto\" = n_embd^2 = 16384 elements"
has "hf_zero3: scheduler from the JSON" "$out" "  type: warmup_decay_lr                          # deepspeed templates/deepspeed/hf_zero3.json:23:17"
same "hf_zero3: the keys with no meaning here named, with their lines and why" "$err" "dtrun: warning: templates/deepspeed/hf_zero3.json: 5 DeepSpeed keys set here have no meaning in dtrun:
  steps_per_print (line 53): dtrun prints every events.interval
  zero_optimization.contiguous_gradients (line 42): dtrun's gradients are always in one contiguous buffer
  zero_optimization.stage3_gather_16bit_weights_on_model_save (line 49): checkpoints hold fp32 weights; dtrun ckpt export writes a whole model
  zero_optimization.offload_optimizer.pin_memory (line 35): dtrun always pins what it offloads from a GPU (a CPU run has nothing to pin)
  zero_optimization.offload_param.pin_memory (line 39): dtrun always pins what it offloads from a GPU (a CPU run has nothing to pin)"
finish
