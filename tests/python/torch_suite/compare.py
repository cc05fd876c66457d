"""Runs torch's distributed_test.py in each mode (distributed_suite.py) and
prints, per mode, passed/failed/skipped against gloo, and every test that
passes over gloo but fails or is skipped over cohort. Exits 1 if there is
one, so that CI can run it.

    python3 compare.py [--modes gloo,cohort,cohort-as-gloo,cohort-as-mpi] [-k EXPR] [--out DIR]

-k selects tests as pytest's -k does (CI runs a subset). Needs
PYTHONPATH to hold cohort_torch (build/python).
"""

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["gloo", "cohort", "cohort-as-gloo", "cohort-as-mpi"]

# Tests that pass over gloo and are known to fail over cohort in a mode,
# each with why. Strict: such a test that passes is reported too, so that
# the list cannot outlive its reason.
KNOWN_DIFFERENCES = {
    ("cohort-as-gloo", "test_ddp_logging_data_cpu"):
        "DDP's logging data says backend_name 'cohort' where dist.get_backend() says 'gloo': a group named "
        "'gloo' to torch's C++ side makes DDP's logger cast its backend to Gloo's class and read Gloo's "
        "thread count out of cohort's (a crash), so the stand-in's groups name themselves cohort there",
    **{("cohort", name):
       "torch's dist.monitored_barrier refuses every backend but gloo (ValueError), and importing cohort_torch "
       "no longer replaces torch's functions (issue 50): over 'cohort' the call is cohort_torch.monitored_barrier; "
       "under COHORT_AS_GLOO (cohort-as-gloo) torch's own runs on cohort's groups and these pass"
       for name in ("test_monitored_barrier_gloo", "test_monitored_barrier_gloo_subgroup")},
}


def run_mode(mode, select, out_dir):
    xml = os.path.join(out_dir, f"{mode}.xml")
    log = os.path.join(out_dir, f"{mode}.log")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
           os.path.join(HERE, "distributed_suite.py"), f"--junitxml={xml}"]
    if select:
        cmd += ["-k", select]
    env = dict(os.environ, COHORT_SUITE_MODE=mode)
    start = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=HERE)
    seconds = time.monotonic() - start
    if not os.path.exists(xml):
        sys.exit(f"torch_suite: mode {mode} produced no results (pytest exit {rc}); see {log}")
    results = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name")
        if case.find("failure") is not None or case.find("error") is not None:
            results[name] = "failed"
        elif case.find("skipped") is not None:
            results[name] = "skipped"
        else:
            results[name] = "passed"
    return results, seconds, log


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("-k", dest="select", default="")
    parser.add_argument("--out", default=os.environ.get("TMPDIR", "/tmp") + "/cohort-torch-suite")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if "gloo" not in modes:
        modes.insert(0, "gloo")
    os.makedirs(args.out, exist_ok=True)
    runs = {}
    for mode in modes:
        runs[mode] = run_mode(mode, args.select, args.out)
        counts = {k: sum(1 for v in runs[mode][0].values() if v == k) for k in ("passed", "failed", "skipped")}
        print(f"{mode}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
              f"in {runs[mode][1]:.0f} s ({runs[mode][2]})", flush=True)

    gloo = runs["gloo"][0]
    gloo_passed = {t for t, v in gloo.items() if v == "passed"}
    print()
    print("| mode | tests | passed | failed | skipped | of gloo's passes: passed | failed | skipped | "
          "passed where gloo skips |")
    print("|---|---|---|---|---|---|---|---|---|")
    lost = []
    for mode in modes:
        res = runs[mode][0]
        n = {k: sum(1 for v in res.values() if v == k) for k in ("passed", "failed", "skipped")}
        kept = {k: sum(1 for t in gloo_passed if res.get(t) == k) for k in ("passed", "failed", "skipped")}
        extra = sum(1 for t, v in res.items() if v == "passed" and gloo.get(t) == "skipped")
        print(f"| {mode} | {len(res)} | {n['passed']} | {n['failed']} | {n['skipped']} | {kept['passed']} | "
              f"{kept['failed']} | {kept['skipped']} | {extra} |")
        # cohort-as-mpi runs the suite gated as for mpi: gloo's passes that
        # mpi's gates skip say nothing about cohort there.
        if mode not in ("gloo", "cohort-as-mpi"):
            lost += [(mode, t, res.get(t, "missing")) for t in sorted(gloo_passed) if res.get(t) != "passed"]
        if mode == "cohort-as-mpi":
            lost += [(mode, t, v) for t, v in sorted(res.items()) if v == "failed"]
    print()
    known = [(m, t, w) for m, t, w in lost if (m, t) in KNOWN_DIFFERENCES]
    lost = [(m, t, w) for m, t, w in lost if (m, t) not in KNOWN_DIFFERENCES]
    for mode, test, what in known:
        print(f"known difference, {mode}: {test} {what}: {KNOWN_DIFFERENCES[(mode, test)]}")
    stale = [(m, t) for (m, t) in KNOWN_DIFFERENCES
             if m in runs and runs[m][0].get(t) == "passed" and gloo.get(t) == "passed"]
    for mode, test in stale:
        print(f"known difference that no longer differs, {mode}: {test} passed (remove it from KNOWN_DIFFERENCES)")
    if lost:
        print("passes over gloo (or runs gated as mpi) that fail or skip over cohort:")
        for mode, test, what in lost:
            print(f"  {mode}: {test} {what}")
    print(f"torch_suite: {len(lost)} tests lost against gloo, {len(known)} known differences")
    return 1 if lost or stale else 0


if __name__ == "__main__":
    sys.exit(main())
