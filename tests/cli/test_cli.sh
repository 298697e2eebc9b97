#!/usr/bin/env bash
# The command line: help, version, exit codes, errors with place and fix,
# overrides, site defaults, and `check` output that reads back to itself.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1

run "--help" 0 "$DTRUN" --help
has "--help documents exit code 3" "$out" "  3  data error (missing or corrupt shards)"
has "--help documents exit code 4" "$out" "  4  communication error (a rank died or a collective timed out)"

run "--version" 0 "$DTRUN" --version
has "--version names the CPU backend" "$out" "kernels: cpu ("
has "--version names libyaml" "$out" "libyaml 0.2."

run "unknown option" 2 "$DTRUN" --frobnicate
same "unknown option: message" "$err" "dtrun: error: unknown option '--frobnicate'
  hint: dtrun --help lists the commands"

run "unknown command" 2 "$DTRUN" trian
same "unknown command: message" "$err" "dtrun: error: 'trian' is neither a command nor a config file
  hint: dtrun --help lists the commands"

run "bad override syntax" 2 "$DTRUN" check optimizer.lr
same "bad override syntax: message" "$err" "optimizer.lr: error: cannot read the config file: No such file or directory
  hint: check the path; \`dtrun check\` with no file shows the built-in default"

run "override without a key" 2 "$DTRUN" check =3
same "override without a key: message" "$err" "override '=3': error: not a key=value override
  hint: write overrides as key.path=value, e.g. optimizer.lr=1e-3"

# a stray word after an override: a usage error, not a crash (#16: the config was freed uninitialized)
run "stray word after an override" 2 "$DTRUN" check optimizer.lr=1e-3 stray
same "stray word after an override: message" "$err" "dtrun: error: 'stray' is neither key=value nor the first argument
  hint: dtrun --help lists the commands"

run "check the built-in default" 0 "$DTRUN" check
has "default: batch identity shown" "$out" "# batch: micro_batch_size 8 x gradient_accumulation_steps 1 x world 1 = 8 sequences (1024 tokens) per optimizer step"
has "default: auto values say how they were filled" "$out" "  strategy: single                               # auto: world size 1"

run "overrides" 0 "$DTRUN" check optimizer.lr=1e-3 compute.precision=bf16 'optimizer.betas=[0.8, 0.99]' run.max_duration=5Mtok
has "override: lr" "$out" "  lr: 0.001                                      # override 'optimizer.lr=1e-3'"
has "override: Lightning's bf16 is bf16-mixed" "$out" "  precision: bf16-mixed"
has "override: a list" "$out" "  betas: [0.8, 0.99]"
has "override: tokens" "$out" "  max_duration: 5000000tok"

run "errors are all reported, with place and fix" 2 "$DTRUN" check optimizer.lr=0 compute.device=tpu optimzer.eps=1
same "errors: message" "$err" "override 'optimizer.lr=0': error: optimizer.lr: must be > 0 and <= 10
override 'compute.device=tpu': error: compute.device: 'tpu' is not one of auto, cpu, cuda (did you mean 'cpu'?)
override 'optimzer.eps=1': error: unknown section 'optimzer' (dtrun config)
  hint: did you mean 'optimizer'?"

printf 'model:\n  n_embd: 130\n  n_head: 4\ndata:\n  train: "x_*.bin"\n  synthetic: {order: 3}\ncompute:\n  strategy: single\n  num_devices: 2\n' >contra.yaml
run "contradictions" 2 "$DTRUN" check contra.yaml
same "contradictions: message" "$err" "contra.yaml:2:11: error: model.n_embd 130 (contra.yaml:2:11) is not divisible by model.n_head 4 (contra.yaml:3:11)
  hint: make n_embd a multiple of n_head
contra.yaml:6:22: error: data.synthetic.order (contra.yaml:6:22) contradicts data.train (contra.yaml:5:10)
  hint: keep data.train for token shards or data.synthetic for the built-in source, not both
contra.yaml:8:13: error: compute.strategy single runs one rank, but the world has 2 (num_nodes 1 x num_devices 2)
  hint: use ddp (or auto) for more than one rank"

printf 'optimizer:\n  lr: "0.1"\n  nesterov: yes\nrun:\n  seed: 1.5\n  name: null\n  dir: auto\ncompute:\n  precision: auto\n' >types.yaml
run "wrong types" 2 "$DTRUN" check types.yaml
same "wrong types: message" "$err" "types.yaml:2:7: error: optimizer.lr: expected a number, got the string \"0.1\" (remove the quotes)
types.yaml:3:13: error: optimizer.nesterov: expected true or false, got 'yes'
types.yaml:5:9: error: run.seed: expected a whole number, got '1.5'
types.yaml:6:9: error: run.name: needs a value: a string
types.yaml:9:14: error: compute.precision: 'auto' is not one of 32-true, 16-mixed, bf16-mixed, bf16-true, fp8-mixed"

# check output is YAML that reads back to the same values
"$DTRUN" check optimizer.lr=2e-3 compute.num_devices=3 >first.yaml 2>/dev/null
run "check output reads back" 0 "$DTRUN" check first.yaml
same "check output reads back to the same values" "$(sed 's/ *#.*//' <<<"$out")" "$(sed 's/ *#.*//' first.yaml)"

printf 'compute:\n  comm_timeout: 900s\nevents:\n  interval: 50ba\n' >site.yaml
printf 'events:\n  interval: 5ba\n' >user.yaml
DTRUN_SITE_CONFIG=site.yaml run "site defaults" 0 "$DTRUN" check user.yaml
has "site defaults: admin's value applies" "$out" "  comm_timeout: 900s                             # site.yaml:2:17"
has "site defaults: the user's config wins" "$out" "  interval: 5ba                                  # user.yaml:2:13"

run "an FSDP sharding strategy with another strategy" 2 "$DTRUN" run compute.strategy=zero3 \
    compute.strategy_config.sharding_strategy=HYBRID_SHARD
same "is refused, naming both" "$err" "override 'compute.strategy_config.sharding_strategy=HYBRID_SHARD': error: compute.strategy_config.sharding_strategy HYBRID_SHARD is FSDP's, but compute.strategy is zero3 (override 'compute.strategy=zero3')
  hint: set compute.strategy: fsdp, or remove sharding_strategy (zero1/2/3 name their stage)"
run "run refuses a world it cannot start" 2 "$DTRUN" run compute.num_devices=2
same "run: says how to start the ranks" "$err" "override 'compute.num_devices=2': error: compute.num_nodes 1 (auto) x compute.num_devices 2 (override 'compute.num_devices=2') = 2 ranks, but dtrun was started as one process
  hint: start the ranks: \`dtrun -n N CONFIG\` on this machine, \`srun --mpi=pmix dtrun CONFIG\` in Slurm"
run "check accepts a config for more ranks than it runs in" 0 "$DTRUN" check compute.num_devices=2

finish
