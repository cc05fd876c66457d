#!/usr/bin/env bash
# mpi_test.sh NP PROGRAM [ARGS...]: runs PROGRAM on NP ranks under mpirun,
# on one host. Exits 77 (ctest's skip) when mpirun is not installed.
#
# --oversubscribe: more ranks than cores is fine here; mpi_yield_when_idle
# makes waiting ranks give up the core instead of spinning on it. MASTER_*
# serve the env:// run (--backend=cohort); the mpi backend ignores them.
set -euo pipefail
np="$1"
shift
if ! command -v mpirun >/dev/null; then
  echo "mpirun not found (apt-get install openmpi-bin): skipped"
  exit 77
fi
root_flags=()
if [ "$(id -u)" = 0 ]; then
  root_flags=(--allow-run-as-root)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export MASTER_ADDR=127.0.0.1
MASTER_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export MASTER_PORT
exec mpirun "${root_flags[@]}" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
  -x MASTER_ADDR -x MASTER_PORT -np "$np" "$@"
