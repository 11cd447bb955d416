# Sourced by the shell benchmarks (bench/mpi_scaling.sh, busy_machine.sh, bf16_speed.sh, ...) for
# their --out and --isa options. --isa native|avx2|avx512 exports the caps of bench/torch_bench.py's
# ISA_CAPS (ONEDNN_MAX_CPU_ISA, WTE_MAX_SIMD, OPENBLAS_CORETYPE) for every process of the run; the
# results file records them. results_run KIND CLAIM HEADLINE_SED -- SCRIPT ARGS... runs the benchmark
# (SCRIPT ARGS, without --out) with its output shown and kept, then writes its results file
# through bench/torch_bench.py (which collects the facts: command line, CPU, load average before
# and after, versions, date). HEADLINE_SED is a sed script printing "WHAT=VALUE" lines from the
# output (the run's headline ratios); the file goes into $results_out.
results_run() {
  local kind="$1" claim="$2" headline_sed="$3"; shift 4
  local here started load_before table status py
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  started=$(date +%s)
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  table=$(mktemp)
  status=0
  "$@" | tee "$table" || status=$?
  if [ "$status" -ne 0 ]; then rm -f "$table"; return "$status"; fi
  local args=()
  while IFS= read -r h; do [ -n "$h" ] && args+=(--headline "$h"); done < <(sed -n "$headline_sed" "$table")
  "$py" "$here/torch_bench.py" record --kind "$kind" --out "$results_out" --wte "${WTE_CLI:-$here/../build/wte}" \
    --command "$results_command" --load-before "$load_before" --started "$started" \
    --table-file "$table" --claim "$claim" "${args[@]}" || status=$?
  rm -f "$table"
  return "$status"
}

# results_apply_isa NAME: exports the caps of the ISA NAME (as bench/torch_bench.py's ISA_CAPS).
results_apply_isa() {
  case "$1" in
    native) ;;
    avx2) export ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 WTE_MAX_SIMD=AVX2 OPENBLAS_CORETYPE=Haswell ;;
    avx512) export ONEDNN_MAX_CPU_ISA=AVX512_CORE DNNL_MAX_CPU_ISA=AVX512_CORE WTE_MAX_SIMD=AVX3 \
              OPENBLAS_CORETYPE=SkylakeX ;;
    *) echo "$0: --isa '$1': expected native, avx2 or avx512" >&2; exit 2 ;;
  esac
  export WTE_BENCH_ISA="$1"
}

# results_parse_out "$@": sets results_out (empty without --out; bench/results when --out has no
# DIR), results_command (the command line as typed) and results_args (the arguments without --out
# and --isa); --isa NAME (or --isa=NAME) exports that ISA's caps (results_apply_isa).
results_parse_out() {
  results_out=""; results_args=()
  results_command="$0 $*"
  while [ $# -gt 0 ]; do
    case "$1" in
      --isa)
        [ $# -gt 1 ] || { echo "$0: --isa needs native, avx2 or avx512" >&2; exit 2; }
        results_apply_isa "$2"; shift 2 ;;
      --isa=*) results_apply_isa "${1#--isa=}"; shift ;;
      --out)
        if [ $# -gt 1 ] && [ "${2#-}" = "$2" ] && [ -n "$2" ] && ! [[ "$2" =~ ^[0-9]+$ ]]; then
          results_out="$2"; shift 2
        else
          results_out="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/results"; shift
        fi ;;
      --out=*) results_out="${1#--out=}"; shift ;;
      *) results_args+=("$1"); shift ;;
    esac
  done
}
