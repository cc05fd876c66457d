"""cohort_torch installed the two ways docs/python.md gives, then used by a
two-rank job that sees only the installed copy: `cmake --install` into a
prefix, and `pip install --no-build-isolation .` (here with --target, over
this build through COHORT_BUILD_DIR, so that the test compiles nothing).

Run by ctest (python.install) with COHORT_BUILD_DIR naming the build."""

import ast
import os
import re
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("COHORT_BUILD_DIR", os.path.join(ROOT, "build")))
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "installed_all_reduce.py")


def run_installed(site_packages):
    """Runs the two-rank program with only `site_packages` added to its path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = site_packages
    r = subprocess.run([sys.executable, PROGRAM], env=env, capture_output=True, text=True, timeout=120,
                       cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = []
    for line in r.stdout.splitlines():
        m = re.match(r"rank (\d) sum (\[.*?\]) module (\S+) lib (\[.*\])$", line)
        if m:
            ranks.append((int(m[1]), m[2], m[3], [os.path.dirname(p) for p in ast.literal_eval(m[4])]))
    assert sorted((rank, total) for rank, total, _, _ in ranks) == [(0, "[3.0, 3.0, 3.0, 3.0]"),
                                                                   (1, "[3.0, 3.0, 3.0, 3.0]")], r.stdout
    return ranks


def test_cmake_install_puts_a_working_package_in_the_prefixs_site_packages(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], check=True, capture_output=True)
    site = os.path.join(prefix, sysconfig.get_path("platlib", vars={"platbase": ".", "base": "."}))
    site = os.path.normpath(site)
    for _, _, module, lib_dirs in run_installed(site):
        assert module == os.path.join(site, "cohort_torch")
        assert lib_dirs == [os.path.join(str(prefix), "lib")]


def test_pip_install_builds_a_self_contained_package(tmp_path):
    target = tmp_path / "target"
    env = dict(os.environ, COHORT_BUILD_DIR=BUILD)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                        "--target", str(target), ROOT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    package = os.path.join(str(target), "cohort_torch")
    assert sorted(f for f in os.listdir(package) if f.endswith(".so") or ".so." in f)[-2:] == [
        "libcohort.so.0", "libcohort_torch.so.0"]
    for _, _, module, lib_dirs in run_installed(str(target)):
        assert module == package
        assert lib_dirs == [package]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
