"""The frameworks people train with, run over cohort and checked against the
same run over gloo: PyTorch Lightning DDP with sync_dist logging, Hugging
Face transformers' tensor-parallel generation, Hugging Face accelerate's
Accelerator (which picks gloo itself: cohort stands in through
COHORT_AS_GLOO), and torch's own torchrun launching cohort programs. Real
processes, real packages (pinned in scripts/lib/common.sh); the programs are
in programs/."""

import json
import os
import subprocess
import sys

import pytest

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def run(args, tmp_path, env=None, timeout=300):
    """Runs a program; returns what rank 0 wrote to its JSON file."""
    out = tmp_path / f"out-{abs(hash((tuple(args), tuple(sorted((env or {}).items())))))}.json"
    full_env = {k: v for k, v in os.environ.items() if k != "COHORT_AS_GLOO"}
    full_env.update(env or {})
    r = subprocess.run([sys.executable] + args + [str(out)], env=full_env, capture_output=True, text=True,
                       timeout=timeout, cwd=str(tmp_path))
    assert r.returncode == 0, f"{args} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    with open(out) as f:
        return json.load(f)


def torchrun(*args):
    return ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]


@pytest.mark.skipif(not have("pytorch_lightning"), reason="pytorch-lightning is not installed")
def test_lightning_ddp_with_sync_dist_logging_trains_as_over_gloo(tmp_path):
    script = os.path.join(PROGRAMS, "lightning_train.py")
    gloo = run([script, "gloo"], tmp_path)
    cohort = run([script, "cohort"], tmp_path)
    stand_in = run([script, "gloo"], tmp_path, env={"COHORT_AS_GLOO": "1"})
    assert gloo["pg_class"] == "ProcessGroupGloo" and gloo["world"] == 2
    assert cohort["pg_class"] == "ProcessGroupCohort" and cohort["backend"] == "cohort"
    assert stand_in["pg_class"] == "ProcessGroupCohort" and stand_in["backend"] == "gloo"
    assert len(gloo["losses"]) == 8
    for other in (cohort, stand_in):
        # Two ranks: every sum and every halving is exact, so the runs agree bit for bit.
        assert other["losses"] == gloo["losses"]
        assert other["metrics"] == gloo["metrics"]
    assert set(gloo["metrics"]) == {"train_loss", "batch_rows", "val_loss"}


@pytest.mark.skipif(not have("transformers"), reason="transformers is not installed")
def test_transformers_tensor_parallel_generates_the_tokens_of_gloo_and_of_one_process(tmp_path):
    script = os.path.join(PROGRAMS, "tp_generate.py")
    model = str(tmp_path / "llama")
    subprocess.run([sys.executable, script, "make", model], check=True, capture_output=True, cwd=str(tmp_path))
    one = run([script, "none", model], tmp_path)
    gloo = run(torchrun(script, "gloo", model), tmp_path)
    cohort = run(torchrun(script, "cohort", model), tmp_path)
    assert one["q_proj_rows"] == 128
    # Sharded over the two ranks: each holds half of every attention projection.
    assert gloo["q_proj_rows"] == 64 and cohort["q_proj_rows"] == 64
    assert cohort["backend"] == "cohort"
    assert len(gloo["tokens"]) == 12 + 24
    assert cohort["tokens"] == gloo["tokens"] == one["tokens"]


@pytest.mark.skipif(not have("accelerate"), reason="accelerate is not installed")
def test_accelerate_ddp_over_cohort_standing_in_for_gloo_trains_as_over_gloo(tmp_path):
    script = os.path.join(PROGRAMS, "accelerate_train.py")
    gloo = run(torchrun(script), tmp_path)
    cohort = run(torchrun(script), tmp_path, env={"COHORT_AS_GLOO": "1"})
    assert gloo["pg_class"] == "ProcessGroupGloo" and gloo["world"] == 2
    assert cohort["pg_class"] == "ProcessGroupCohort" and cohort["backend"] == "gloo"
    assert len(gloo["losses"]) == 8
    assert cohort["losses"] == gloo["losses"]
    assert cohort["checksum"] == gloo["checksum"]


def test_torchrun_launches_a_cohort_ddp_program_that_trains_as_over_gloo(tmp_path):
    script = os.path.join(PROGRAMS, "ddp_train.py")
    gloo = run(torchrun(script, "gloo"), tmp_path)
    cohort = run(torchrun(script, "cohort"), tmp_path)
    stand_in = run(torchrun(script, "gloo"), tmp_path, env={"COHORT_AS_GLOO": "1"})
    assert gloo["pg_class"] == "ProcessGroupGloo"
    assert cohort["pg_class"] == "ProcessGroupCohort" and stand_in["pg_class"] == "ProcessGroupCohort"
    assert gloo["losses"][-1] < gloo["losses"][0]
    for other in (cohort, stand_in):
        assert other["losses"] == gloo["losses"]
        assert other["checksum"] == gloo["checksum"]


def test_cohortrun_as_gloo_gives_a_gloo_program_cohort_groups(tmp_path):
    cohortrun = os.path.join(os.environ.get("COHORT_BUILD_DIR", ""), "tools", "cohortrun")
    if not os.path.exists(cohortrun):
        pytest.skip("cohortrun is not built")
    script = os.path.join(PROGRAMS, "ddp_train.py")
    for flags, expected in ((["--as-gloo"], "ProcessGroupCohort"), ([], "ProcessGroupGloo")):
        out = tmp_path / f"cohortrun{len(flags)}.json"
        env = {k: v for k, v in os.environ.items() if k != "COHORT_AS_GLOO"}
        r = subprocess.run([cohortrun, "--standalone", "--nproc-per-node", "2", *flags, script, "gloo", str(out)],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        with open(out) as f:
            got = json.load(f)
        assert got["pg_class"] == expected and got["backend"] == "gloo", got


def test_as_gloo_needs_no_torch_in_pythons_that_have_none(tmp_path):
    """The start-up hook runs in every Python started with build/python on
    its path; one without torch (a tool's) must start as before."""
    import shutil

    system_python = shutil.which("python3", path="/usr/bin")
    if system_python is None or subprocess.run([system_python, "-c", "import torch"],
                                               capture_output=True).returncode == 0:
        pytest.skip("no Python without torch here")
    r = subprocess.run([system_python, "-c", "print('started')"], capture_output=True, text=True,
                       env=dict(os.environ, COHORT_AS_GLOO="1"))
    assert r.returncode == 0 and r.stdout.strip() == "started" and r.stderr == "", r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
