#!/usr/bin/env bash
# Builds the native half of the JVM binding (run by Maven in generate-sources, or alone):
#   1. the cdylib `libdelayq_jvm.so` and `uniffi-bindgen` with cargo (release profile;
#      DELAYQ_CARGO_PROFILE=dev for a quicker debug build),
#   2. the Kotlin bindings, generated from the library into target/generated-sources/uniffi,
#   3. a copy of the library under target/native/<jna-platform>/, packaged into the jar
#      where JNA looks for it (linux-x86-64/libdelayq_jvm.so).
# Honours CARGO_TARGET_DIR; without it cargo uses the workspace's target/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
profile="${DELAYQ_CARGO_PROFILE:-release}"
case "$profile" in
  release) outdir=release ;;
  dev | debug) profile=dev; outdir=debug ;;
  *) echo "DELAYQ_CARGO_PROFILE must be release or dev" >&2; exit 2 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) platform=linux-x86-64 ;;
  aarch64 | arm64) platform=linux-aarch64 ;;
  *) platform="linux-$(uname -m)" ;;
esac

cd "$root"
cargo build --profile "$profile" -p delayq-jvm --features bindgen
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
lib="$target_dir/$outdir/libdelayq_jvm.so"

gen="$here/target/generated-sources/uniffi"
rm -rf "$gen"
mkdir -p "$gen" "$here/target/native/$platform"
(cd "$here" && "$target_dir/$outdir/uniffi-bindgen" generate --library "$lib" \
  --language kotlin --no-format --out-dir "$gen")
# One JNA Structure less per call: each call's status struct is reused per thread instead
# of allocated (JNA tracks every native allocation in one map whose cost dominated calls;
# see README, "Performance"). Calls nest on a thread only while lowering arguments, which
# finishes before the outer call runs, so sharing one struct per thread is safe.
kt="$gen/dev/delayq/ffi/delayq_jvm.kt"
grep -q '^    var status = UniffiRustCallStatus()$' "$kt" || { echo "generated code changed: update build-native.sh" >&2; exit 1; }
sed -i 's/^    var status = UniffiRustCallStatus()$/    val status = uniffiCallStatus.get(); status.code = UNIFFI_CALL_SUCCESS/' "$kt"
printf '\nprivate val uniffiCallStatus: ThreadLocal<UniffiRustCallStatus> = ThreadLocal.withInitial { UniffiRustCallStatus() }\n' >>"$kt"
cp "$lib" "$here/target/native/$platform/libdelayq_jvm.so"
# Tests find the workspace's cargo target dir (and so the CLI) here.
printf '%s\n' "$target_dir" >"$here/target/cargo-target-dir"
