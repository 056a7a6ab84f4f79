#!/usr/bin/env bash
# Fuzzes Lorekeeper's parsers with cargo-fuzz (libFuzzer, AddressSanitizer, overflow checks;
# nightly). Each target starts from fuzz/seeds/TARGET and the inputs kept from earlier runs.
#   scripts/fuzz.sh                      every target, 1,000,000 executions each
#   scripts/fuzz.sh --runs 200000 gguf   one target, fewer executions
#   scripts/fuzz.sh --time 120 index     one target for 120 seconds
# A crash stops its target and leaves the input in fuzz/libfuzzer/artifacts/TARGET/; once the
# parser is fixed, copy it to fuzz/regressions/TARGET/ so that ./test.sh replays it on stable
# (cargo test -p lorekeeper-fuzz). Prints executions and rate per target at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1000000 time=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --time) time=$2; runs=0; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(gguf safetensors config manifest e5s1 index corpus action)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
dir=fuzz/libfuzzer

for t in "${targets[@]}"; do cargo +nightly fuzz build --fuzz-dir "$dir" "$t" >/dev/null; done
summary=()
status=0
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  log=$(mktemp)
  limit=(-runs="$runs")
  [ "$time" -gt 0 ] && limit=(-max_total_time="$time")
  # -rss_limit_mb: a parser that allocates what the input cannot justify is a failure too.
  if cargo +nightly fuzz run --fuzz-dir "$dir" "$t" "$dir/corpus/$t" "fuzz/seeds/$t" \
      -- "${limit[@]}" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    verdict=ok
  else
    verdict="CRASH (see $dir/artifacts/$t/)"; status=1
    grep -E "panicked|ERROR|SUMMARY" "$log" | head -5
  fi
  done_line=$(grep -E "^Done [0-9]+ runs" "$log" | tail -1 || true)
  execs=$(grep -E "stat::number_of_executed_units" "$log" | awk "{print \$2}" | tail -1 || true)
  secs=$(grep -E "^Done [0-9]+ runs in" "$log" | sed -E 's/.* in ([0-9]+) second.*/\1/' | tail -1 || true)
  summary+=("$(printf '%-12s %10s executions in %5ss  %s' "$t" "${execs:-?}" "${secs:-?}" "$verdict")")
  echo "${summary[-1]}   ${done_line}"
  rm -f "$log"
done
echo "== fuzz summary =="
printf '%s\n' "${summary[@]}"
exit $status
