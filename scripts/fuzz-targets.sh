# shellcheck shell=bash disable=SC2034 # sourced: fuzz_options is used by the scripts that source it
# Sourced by scripts/fuzz.sh and scripts/fuzz-campaign.sh (from the project
# root): the fuzz tree, and every libFuzzer target with its seed directories.
fuzz_dir=build-fuzz

# One line per target: NAME CORPUS [EXTRA...]. CORPUS is the committed seed
# corpus that fuzz-campaign.sh grows and minimises; the extra directories are
# read as seeds but never written (examples and golden tests for fuzz_oir,
# real MIL from Apple's tools and others in ../shared, which stays outside
# the project).
fuzz_targets() {
  echo fuzz_oir testsuite/fuzz/corpus_oir examples testsuite/golden
  echo fuzz_weights testsuite/fuzz/corpus_weights
  echo fuzz_blob testsuite/fuzz/corpus_blob
  echo fuzz_manifest testsuite/fuzz/corpus_manifest
  echo fuzz_constraints testsuite/fuzz/corpus_constraints
  echo fuzz_mil testsuite/fuzz/corpus_mil testsuite/mil "$( [ -d ../shared/corpus/mil ] && echo ../shared/corpus/mil)"
  echo fuzz_npy testsuite/fuzz/corpus_npy
  echo fuzz_journal testsuite/fuzz/corpus_journal
  # The tools' option parser; its error messages go to stderr (the log), not the terminal.
  echo fuzz_options testsuite/fuzz/corpus_options
  echo fuzz_pkg_paths testsuite/fuzz/corpus_pkg_paths
  echo fuzz_patch_set testsuite/fuzz/corpus_patch_set
  echo fuzz_train_log testsuite/fuzz/corpus_train_log testsuite/train
  echo fuzz_convert_config testsuite/fuzz/corpus_convert_config
  # Texts (even first byte) and vocab.json/merges.txt pairs (odd) for the tokenizers; the tiny BPE's files are seeds too.
  echo fuzz_tokenize testsuite/fuzz/corpus_tokenize
  # The ane backend's cached weight-update choice (a file under ~/.cache that anything may have written).
  echo fuzz_ane_update_cache testsuite/fuzz/corpus_ane_update_cache
}

# Configures (once) and builds every target with clang, ASan and UBSan.
# CXX too: with libsentencepiece, C++ is a project language and fuzz_tokenize
# links through the C++ linker, which must know -fsanitize=fuzzer.
fuzz_build() {
  if [ ! -f "$fuzz_dir/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$fuzz_dir" -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false \
      -Dbuildtype=debugoptimized >"$fuzz_dir.setup.log" 2>&1 || { cat "$fuzz_dir.setup.log"; return 1; }
  fi
  local name rest ninja_targets=()
  while read -r name rest; do ninja_targets+=("testsuite/fuzz/$name"); done < <(fuzz_targets)
  ninja -C "$fuzz_dir" "${ninja_targets[@]}" >"$fuzz_dir.build.log" 2>&1 || { cat "$fuzz_dir.build.log"; return 1; }
}

# libFuzzer's options every run shares. An input counts as a hang after
# 120 s (-timeout): none has come near the 10 s at which libFuzzer reports a
# slow unit, and a loaded machine must not turn a slow input into a finding.
fuzz_options=(-timeout=120 -rss_limit_mb=2048)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
