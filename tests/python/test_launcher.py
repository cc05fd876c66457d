"""cohortrun runs Python programs as torchrun does: a .py script or -m
module with the Python that has torch, its arguments passed on, and this
build's cohort_torch found without PYTHONPATH set by hand."""

import os
import re
import subprocess
import sys

import pytest

BUILD = os.environ.get("COHORT_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
COHORTRUN = os.path.abspath(os.path.join(BUILD, "tools", "cohortrun"))
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def cohortrun(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([COHORTRUN, "--standalone", "--nproc-per-node", "2", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def ranks_reported(stdout):
    return sorted(re.findall(r"rank (\d) of 2: p2p 1.0 sum 3.0 args (\[.*\])", stdout))


@pytest.mark.skipif(not os.path.exists(COHORTRUN), reason="cohortrun is not built")
def test_a_script_runs_in_python_with_its_arguments():
    r = cohortrun(os.path.join(PROGRAMS, "tutorial_under_launcher.py"), "--lr", "0.1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ranks_reported(r.stdout) == [("0", "['--lr', '0.1']"), ("1", "['--lr', '0.1']")], r.stdout


@pytest.mark.skipif(not os.path.exists(COHORTRUN), reason="cohortrun is not built")
def test_a_module_runs_with_dash_m():
    r = cohortrun("-m", "tutorial_under_launcher", "x", cwd=PROGRAMS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ranks_reported(r.stdout) == [("0", "['x']"), ("1", "['x']")], r.stdout


@pytest.mark.skipif(not os.path.exists(COHORTRUN), reason="cohortrun is not built")
def test_no_python_runs_the_file_as_given():
    # Without the execute bit a .py file cannot run as given: the launcher says so.
    r = cohortrun("--no-python", os.path.join(PROGRAMS, "tutorial_under_launcher.py"))
    assert r.returncode != 0
    assert "tutorial_under_launcher.py" in r.stdout + r.stderr


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python")


def first_and_last_loss(stdout):
    losses = [float(v) for v in re.findall(r"step \d+: (?:mean )?loss(?: over \d ranks)? ([\d.]+)", stdout)]
    assert len(losses) == 2, stdout
    return losses


@pytest.mark.skipif(not os.path.exists(COHORTRUN), reason="cohortrun is not built")
@pytest.mark.parametrize("example", ["ddp.py", "fsdp2.py"])
def test_the_python_examples_train_under_cohortrun(example):
    r = cohortrun(os.path.join(EXAMPLES, example))
    assert r.returncode == 0, r.stdout + r.stderr
    first, last = first_and_last_loss(r.stdout)
    assert last < 0.7 * first, r.stdout
    if example == "fsdp2.py":
        held = re.search(r"rank 0 holds (\d+) of (\d+) parameters", r.stdout)
        assert held and int(held.group(1)) < int(held.group(2)), r.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def bound_ranks(env, launcher=None):
    """Runs programs/bound_rank.py under torchrun (or `launcher`), 2 ranks;
    returns {rank: (set of CPUs, torch's threads before init, and after)}."""
    full = dict(os.environ, OMP_NUM_THREADS="4", **env)
    launcher = launcher or [sys.executable, "-m", "torch.distributed.run"]
    r = subprocess.run([*launcher, "--standalone", "--nproc-per-node", "2", os.path.join(PROGRAMS, "bound_rank.py")],
                       env=full, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.findall(r"rank (\d): cpus ([\d,]+) threads (\d+)->(\d+) sum 2.0", r.stdout)
    assert len(found) == 2, r.stdout + r.stderr
    return {int(rank): ({int(c) for c in cpus.split(",")}, int(before), int(after))
            for rank, cpus, before, after in found}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_ranks_torchrun_started_bind_themselves_to_disjoint_cpus_and_torch_threads_fit():
    ranks = bound_ranks({"COHORT_BIND": "cores"})
    mine = set(os.sched_getaffinity(0))
    cpus0, cpus1 = ranks[0][0], ranks[1][0]
    assert cpus0 and cpus1 and not cpus0 & cpus1 and cpus0 | cpus1 <= mine, ranks
    # OMP_NUM_THREADS=4 (torch caps it at the host's cores): on a host of
    # few cores torch started more threads than a share has CPUs, and each
    # rank keeps no more than its CPUs.
    for cpus, before, after in ranks.values():
        assert after == min(before, len(cpus)), ranks


def test_cohort_bind_none_leaves_torchruns_ranks_where_they_were():
    ranks = bound_ranks({"COHORT_BIND": "none"})
    mine = set(os.sched_getaffinity(0))
    for cpus, before, after in ranks.values():
        assert cpus == mine and after == before, ranks


@pytest.mark.skipif(not os.path.exists(COHORTRUN) or len(os.sched_getaffinity(0)) < 2,
                    reason="needs cohortrun and two CPUs")
def test_cohortrun_binds_python_workers_and_torch_threads_stay_within_their_cpus():
    ranks = bound_ranks({}, launcher=[COHORTRUN])
    cpus0, cpus1 = ranks[0][0], ranks[1][0]
    assert cpus0 and cpus1 and not cpus0 & cpus1, ranks
    for cpus, _, after in ranks.values():
        assert after <= len(cpus), ranks
