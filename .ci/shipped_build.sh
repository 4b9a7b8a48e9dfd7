#!/usr/bin/env bash
# The build a person runs (README's first command, `cargo run --locked`): no dev-dependencies,
# so no `faults` feature (Cargo.toml). Checks that it builds and that its binary has no crash
# point: an ingest told to stop at one (`PARAVAULT_CRASH_AT`, which stops every test build
# there) finishes instead. Usage: .ci/shipped_build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --bin paravault
bin="${CARGO_TARGET_DIR:-target}/debug/paravault"
vault="$(mktemp -d)"
trap 'rm -rf "$vault"' EXIT
"$bin" --vault "$vault" init >/dev/null
for point in after_lock after_commit after_receipt; do
  PARAVAULT_CRASH_AT="$point" timeout 120 "$bin" --vault "$vault" ingest "01_Projects/shipped-$point" --type Project \
    --title "Shipped $point" --description "a crash point that must not exist" --content "Written past $point." >/dev/null
  test -f "$vault/01_Projects/shipped-$point.md" || { echo "the ingest past $point wrote no note" >&2; exit 1; }
done
echo "shipped build: no crash points (3 ingests told to stop at one finished)"
