#!/usr/bin/env bash
# check_layers_test.sh: scripts/check_layers passes a tree whose includes go
# down the table, and fails (naming file, line and both layers) on one that
# goes up, on a file in no layer, and on tcp/ including shm/.
set -uo pipefail
check="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

make_tree() {
  rm -rf "$tmp/repo"
  mkdir -p "$tmp/repo/docs" "$tmp/repo/src/common" "$tmp/repo/src/store" "$tmp/repo/src/transport/tcp" \
    "$tmp/repo/src/transport/shm" "$tmp/repo/include/cohort"
  cat >"$tmp/repo/docs/design.md" <<'MD'
# design

## Layers, bottom up

| layer | folders | what it owns |
|---|---|---|
| common | `src/common/` | basics |
| store | `src/store/`, `include/cohort/store.h` | stores |
| transport | `src/transport/`, `src/transport/tcp/`, `src/transport/shm/` | links |

## Next section
MD
  echo '#pragma once' >"$tmp/repo/src/common/status.h"
  printf '#pragma once\n#include "common/status.h"\n' >"$tmp/repo/include/cohort/store.h"
  printf '#include "cohort/store.h"\n#include "common/status.h"\n' >"$tmp/repo/src/store/tcp_store.cc"
  printf '#pragma once\n#include "cohort/store.h"\n' >"$tmp/repo/src/transport/tcp/link.h"
  echo '#pragma once' >"$tmp/repo/src/transport/shm/ring.h"
}

make_tree
out=$("$check" "$tmp/repo") || fail "a tree that follows the table was refused: $out"

make_tree
printf '#pragma once\n\n#include "store/tcp_store.h"\n' >"$tmp/repo/src/common/status.h"
touch "$tmp/repo/src/store/tcp_store.h"
out=$("$check" "$tmp/repo") && fail "an upward include passed: $out"
grep -q "src/common/status.h:3: layer 'common' includes \"store/tcp_store.h\" of layer 'store'" <<<"$out" ||
  fail "the upward include is not named: $out"

make_tree
mkdir -p "$tmp/repo/src/launcher" && touch "$tmp/repo/src/launcher/cli.cc"
out=$("$check" "$tmp/repo") && fail "a file in no layer passed: $out"
grep -q "src/launcher/cli.cc: in no layer" <<<"$out" || fail "the unplaced file is not named: $out"

make_tree
printf '#include "transport/shm/ring.h"\n' >>"$tmp/repo/src/transport/tcp/link.h"
out=$("$check" "$tmp/repo") && fail "tcp/ including shm/ passed: $out"
grep -q "must not include each other" <<<"$out" || fail "tcp/ including shm/ is not named: $out"

echo "check_layers accepts a tree that follows the table and names each of three violations"
