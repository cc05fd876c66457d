"""cohort_torch installed the ways docs/python.md gives, then used by a
two-rank job that sees only the installed copy: `cmake --install` into a
prefix, `pip install --no-build-isolation .` (here with --target), and a
wheel from `pip wheel` installed into a fresh virtual environment, where
the job never imports cohort_torch (torch's entry point). The pip builds
reuse this build through COHORT_BUILD_DIR, so that the test compiles
nothing.

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


def run_installed(site_packages, python=sys.executable, *flags):
    """Runs the two-rank program with only `site_packages` added to its path
    (None: nothing added, the interpreter's own site-packages)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COHORT_AS_GLOO")}
    if site_packages is not None:
        env["PYTHONPATH"] = site_packages
    r = subprocess.run([python, PROGRAM, *flags], env=env, capture_output=True, text=True, timeout=120,
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


def pip_over_this_build(*args):
    """`python3 -m pip ARGS... ROOT` over this build (COHORT_BUILD_DIR): it compiles nothing."""
    env = dict(os.environ, COHORT_BUILD_DIR=BUILD)
    r = subprocess.run([sys.executable, "-m", "pip", *args, "-q", "--no-build-isolation", "--no-deps", ROOT],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pip_install_builds_a_self_contained_package(tmp_path):
    target = tmp_path / "target"
    pip_over_this_build("install", "--target", str(target))
    package = os.path.join(str(target), "cohort_torch")
    # The libraries, and the optional backends' modules this build has
    # (libcohort loads them from its own folder).
    modules = sorted(f for f in ("libcohort_mpi.so", "libcohort_nccl.so")
                     if os.path.exists(os.path.join(BUILD, "src", f)))
    libraries = sorted(f for f in os.listdir(package) if f.startswith("libcohort"))
    assert libraries == sorted(["libcohort.so.0", "libcohort_torch.so.0", *modules])
    for _, _, module, lib_dirs in run_installed(str(target)):
        assert module == package
        assert lib_dirs == [package]


def test_a_wheel_installed_into_a_fresh_venv_makes_cohort_a_backend_without_an_import(tmp_path):
    wheels = tmp_path / "wheels"
    pip_over_this_build("wheel", "-w", str(wheels))
    [wheel] = os.listdir(wheels)
    # Built for this interpreter and platform, and for the torch it was built against.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.startswith("cohort_torch-0.1.0-") and f"-{tag}-{tag}-linux_" in wheel, wheel
    import torch

    # A fresh environment that sees the system's torch and nothing of this tree.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheels / wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([python, "-m", "pip", "show", "cohort-torch"], capture_output=True, text=True, check=True)
    assert "Requires: torch" in r.stdout, r.stdout
    import importlib.metadata as metadata

    requires = metadata.Distribution.at(
        next((venv / "lib").glob("python*/site-packages/cohort_torch-0.1.0.dist-info"))).requires
    assert requires == [f"torch=={torch.__version__.split('+')[0]}"], requires
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for _, _, module, lib_dirs in run_installed(None, python, "--no-import"):
        assert module == os.path.join(site, "cohort_torch")
        assert lib_dirs == [module]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COHORT_AS_GLOO")}
    # COHORT_AS_GLOO still works from the wheel (its .pth file): a gloo group is cohort's.
    as_gloo = ("import torch, torch.distributed as d; d.init_process_group('gloo', store=d.HashStore(), rank=0, "
               "world_size=1); print(type(d.group.WORLD._get_backend(torch.device('cpu'))).__name__)")
    r = subprocess.run([python, "-c", as_gloo], env=dict(env, COHORT_AS_GLOO="1"), capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert r.stdout.strip() == "ProcessGroupCohort", r.stdout + r.stderr
    # torch's switch for its entry points turns cohort's off too: the name is unknown.
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    r = subprocess.run([python, "-c", "import torch.distributed as d; print(getattr(d.Backend, 'COHORT', None))"],
                       env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert r.stdout.strip() == "None", r.stdout + r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
