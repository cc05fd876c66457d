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
