#!/usr/bin/env bash
# fuzz/run.sh: builds the libFuzzer targets on the stable toolchain (coverage instrumentation
# through stable -C flags, no sanitizer, no cargo-fuzz, no nightly) and runs each target for a
# fixed number of executions, printing the executions and crashes per target.
#
#   fuzz/run.sh                      # every target, 10,000,000 executions each
#   FUZZ_RUNS=100000 fuzz/run.sh query catalog
#
# New interesting inputs go to fuzz/work/<target>/ (scratch, git-ignored); the committed seeds in
# fuzz/corpus/<target>/ are read, never written. A crash leaves its input in
# fuzz/artifacts/<target>/ and stops that target: fix it, copy the input into
# fuzz/corpus/<target>/ under a descriptive name (replayed by `cargo test`), run again.
set -euo pipefail
cd "$(dirname "$0")"
runs=${FUZZ_RUNS:-10000000}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(frontmatter note_path query proposal catalog mcp_framing)
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
# What cargo-fuzz passes with `--sanitizer none`, all stable flags; overflow and debug
# assertions on, as in cargo-fuzz's default build.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks"
cargo build --release --locked --bins --target "$triple"
mkdir -p logs
status=0
for t in "${targets[@]}"; do
  mkdir -p "work/$t" "artifacts/$t"
  # -timeout: an input that takes over 10 s is a hang (a parser bomb) and fails the run.
  if ./target/"$triple"/release/"$t" -runs="$runs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 "work/$t" "corpus/$t" > "logs/$t.log" 2>&1; then
    verdict=ok
  else
    verdict=CRASH
    status=1
  fi
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -1)
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "logs/$t.log" | tail -1)
  echo "$t: $verdict, ${executed:-?} executions (${secs:-?}/s); log fuzz/logs/$t.log"
done
exit $status
