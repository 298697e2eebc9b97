#!/usr/bin/env bash
# The CUDA module (issue #10): dtrun links no CUDA library, loads dtrun_cuda.so only when a GPU is
# wanted, and says which path and why when the module is missing, unloadable or from another
# version; compute.device cpu (and auto on a machine without an NVIDIA driver) never maps it.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
if "$DTRUN" --version | grep -q '^cuda: not built'; then
    echo "1..0 # SKIP this dtrun was built without CUDA"
    exit 0
fi
gpu_machine=0
[ -e /dev/nvidiactl ] || [ -e /proc/driver/nvidia/version ] && gpu_machine=1
hint="  hint: compute.device: cpu needs no module; for GPUs reinstall dtrun (make install puts the module in"

libs=$(ldd "$DTRUN" | grep -oE 'lib(cudart|nccl|cublas[A-Za-z]*|cuda)\.so[^ ]*' | tr '\n' ' ')
same "dtrun itself links no CUDA library" "$libs" ""
run "--version loads the module from the build tree" 0 "$DTRUN" --version
has "and reports CUDA, cuBLASLt and NCCL" "$(grep '^cuda: ' <<<"$out")" "cuda: CUDA runtime "
# what a process maps: LD_DEBUG names every library the loader opens
maps_cuda() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -cE 'calling init: .*lib(cudart|nccl|cublasLt)'; }
same "dtrun check with compute.device cpu maps no CUDA library" "$(maps_cuda "$DTRUN" check compute.device=cpu)" 0
same "a bad config file maps none either" "$(maps_cuda "$DTRUN" check nope.yaml)" 0
if [ $gpu_machine = 0 ]; then
    same "compute.device auto without an NVIDIA driver maps none" "$(maps_cuda "$DTRUN" check)" 0
    run "training asks for cuda on a machine without GPU" 2 "$DTRUN" run compute.device=cuda run.dir=r
    has "one message says why, before anything else" "$err" "dtrun: rank 0: error: compute.device is cuda, but this process can use no GPU (no GPU: "
    same "and nothing claims a device first" "$(grep -c 'device cpu' <<<"$err")" 0
fi
[ "$(maps_cuda "$DTRUN" check compute.device=cuda)" -ge 1 ] && ok "compute.device cuda loads the module" ||
    not_ok "compute.device cuda did not load the CUDA libraries"

DTRUN_CUDA_MODULE=$TMP/none.so run "a missing module" 6 "$DTRUN" check compute.device=cuda
same "names the path and the reason" "$(head -1 <<<"$err")" \
    "$TMP/none.so: error: cannot load dtrun's CUDA module: cannot open shared object file: No such file or directory"
has "and how to fix it" "$err" "$hint"
head -c 4096 /dev/zero | tr "\\0" x >junk.so
DTRUN_CUDA_MODULE=$TMP/junk.so run "an unloadable module" 6 "$DTRUN" check compute.device=cuda
same "names the path and the loader's reason" "$(head -1 <<<"$err")" \
    "$TMP/junk.so: error: cannot load dtrun's CUDA module: invalid ELF header"
yaml=$(ldd "$DTRUN" | sed -n 's/.*libyaml[^ ]* => \([^ ]*\) .*/\1/p')
DTRUN_CUDA_MODULE=$yaml run "a library that is not a dtrun module" 6 "$DTRUN" check compute.device=cuda
same "is named as such" "$(head -1 <<<"$err")" "$yaml: error: not a dtrun CUDA module (it has no 'dt_cuda_module' symbol)"
other=$(dirname "$DTRUN")/../tests/unit/.libs/cuda_module_other.so
version=$("$DTRUN" --version | sed -n 's/^dtrun //p')
abi=$(sed -n 's/^#define DT_CUDA_MODULE_ABI \([0-9]*\).*/\1/p' "$DT_SRCDIR/kernels/cuda/module.h") # the one both were built with
DTRUN_CUDA_MODULE=$other run "a module from another version" 6 "$DTRUN" check compute.device=cuda
same "is refused with both versions" "$(head -1 <<<"$err")" \
    "$other: error: the CUDA module is from dtrun 0.0.0-other (module interface $abi), this is dtrun $version (interface $abi)"
DTRUN_CUDA_MODULE=$TMP/none.so run "dtrun info without the module" 0 "$DTRUN" info
has "says why there is no GPU" "$out" "$TMP/none.so: error: cannot load dtrun's CUDA module: cannot open shared object file"
DTRUN_CUDA_MODULE=$TMP/none.so run "compute.device cpu without the module" 0 "$DTRUN" run compute.device=cpu \
    run.max_duration=2ba model.n_layer=1 run.dir=cpu
finish
