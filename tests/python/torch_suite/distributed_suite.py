"""torch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped in the torch wheel) as torch's CI runs it per
backend (test/distributed/test_distributed_spawn.py: a TestDistBackend +
DistributedTest._DistTestBase subclass, WORLD_SIZE=3), over gloo or cohort.

COHORT_SUITE_MODE picks the run:
  gloo            torch's gloo, the reference.
  cohort          backend "cohort"; the suite's gates (the tests it skips
                  unless BACKEND is gloo, nccl, ...) and the branches inside
                  its tests are taken as for gloo, so cohort runs every test
                  gloo runs, as gloo runs it.
  cohort-as-gloo  backend "gloo" with COHORT_AS_GLOO=1: every group torch
                  makes is a cohort group while torch and the tests see gloo.
  cohort-as-mpi   backend "cohort", gated as for mpi (the CPU tests the suite
                  runs only for mpi, all_to_all's among them).

scripts/torch_suite runs the modes and prints the table. Differences from
torch's runner: ranks start from a fork server that imported torch and this
file once (multiprocessing's "forkserver"), not by spawn (a fresh
interpreter per rank per test: the same isolation, a tenth of the time);
the per-test environment (TEMP_DIR, INIT_METHOD) goes to each rank as an
argument, since the fork server's own environment is the first test's.
"""

import os
import sys

MODE = os.environ.get("COHORT_SUITE_MODE", "gloo")
_GATES = {"gloo": "gloo", "cohort": "gloo", "cohort-as-gloo": "gloo", "cohort-as-mpi": "mpi"}
_RUNS_AS = {"gloo": "gloo", "cohort": "cohort", "cohort-as-gloo": "gloo", "cohort-as-mpi": "cohort"}
if MODE not in _GATES:
    sys.exit(f"COHORT_SUITE_MODE={MODE!r}: expected one of {', '.join(_GATES)}")
os.environ.setdefault("WORLD_SIZE", "3")
if MODE == "cohort-as-gloo":
    os.environ["COHORT_AS_GLOO"] = "1"
# The suite reads BACKEND when it is imported (its gates) and when a test
# runs (init_process_group, and branches inside tests).
os.environ["BACKEND"] = _GATES[MODE]

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

if MODE != "gloo":
    import cohort_torch  # noqa: F401,E402  (registers "cohort"; installs the gloo stand-in when asked)

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402



class _BackendName(str):
    """The suite's BACKEND in the modes that run "cohort" under another
    backend's gates: its value, which is what reaches torch
    (init_process_group, new_group), is "cohort"; compared with a name it
    also equals the gated one, so every branch the suite takes inside a test
    for gloo (or mpi) it takes for cohort too."""

    def __new__(cls, value, gated_as):
        name = super().__new__(cls, value)
        name.gated_as = gated_as
        return name

    def __eq__(self, other):
        return str.__eq__(self, other) or other == self.gated_as

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


if _RUNS_AS[MODE] != _GATES[MODE]:
    distributed_test.BACKEND = _BackendName(_RUNS_AS[MODE], _GATES[MODE])
if MODE == "cohort-as-gloo":
    assert cohort_torch.as_gloo.installed(), "COHORT_AS_GLOO=1 did not install the stand-in"

_PER_TEST_ENV = ("TEMP_DIR", "INIT_METHOD", "MASTER_ADDR", "MASTER_PORT")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        env = {k: os.environ[k] for k in _PER_TEST_ENV if k in os.environ}
        self.processes = []
        for rank in range(int(self.world_size)):
            parent_conn, child_conn = mp.Pipe()
            process = ctx.Process(
                target=self.__class__._run_with_env,
                name=f"process {rank}",
                args=(env, rank, self._current_test_name(), self.file_name, child_conn),
            )
            process.start()
            self.pid_to_pipe[process.pid] = parent_conn
            self.processes.append(process)

    @classmethod
    def _run_with_env(cls, env, rank, test_name, file_name, pipe):
        os.environ.update(env)
        cls._run(rank, test_name, file_name, pipe)


if __name__ == "__main__":
    run_tests()
