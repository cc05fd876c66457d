"""`pip install --no-build-isolation .` (or `pip wheel --no-build-isolation
.`, then install the wheel): builds and installs cohort_torch,
cohort as a torch.distributed backend, against the torch of the Python that
runs pip.

--no-build-isolation is needed as for other torch extensions: the extension
must be compiled against the very torch it will load with, and pip's
isolated build environment has none (or would fetch another). The C++ build
is the project's own CMake build (in build-pip/, or in COHORT_BUILD_DIR
when set, for example an existing build/); the package holds the module,
_C and copies of libcohort and libcohort_torch, which find each other
through $ORIGIN.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def torch_version():
    try:
        import torch
    except ImportError:
        sys.exit(
            f"cohort_torch builds against the torch of {sys.executable}, which has none: "
            "'pip install torch==2.13.0' first, then 'pip install --no-build-isolation .'"
        )
    return torch.__version__.split("+")[0]


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        torch_version()
        build = os.path.abspath(os.environ.get("COHORT_BUILD_DIR") or os.path.join(ROOT, "build-pip"))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", f"-DCOHORT_PYTHON={sys.executable}",
                "-DCOHORT_WITH_TORCH=ON", "-DCOHORT_WITH_PYTHON=ON", "-DCOHORT_BUILD_TESTS=OFF",
                "-DCOHORT_BUILD_BENCH=OFF",
            ])
        jobs = os.environ.get("COHORT_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(
            ["cmake", "--build", build, "--target", "cohort_torch_python", "cohort_backend_modules", "-j", jobs]
        )
        package = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(package, exist_ok=True)
        built = glob.glob(os.path.join(build, "python", "cohort_torch", "_C*.so"))
        libraries = [os.path.join(build, "src", name) for name in ("libcohort.so.0", "libcohort_torch.so.0")]
        if len(built) != 1 or not all(os.path.exists(p) for p in libraries):
            sys.exit(f"cohort: the CMake build in {build} did not produce _C, libcohort.so.0 and libcohort_torch.so.0")
        # The MPI and NCCL backends' modules, where this build has them:
        # libcohort loads them from its own folder (src/process_group/backend_module.h).
        modules = sorted(glob.glob(os.path.join(build, "src", "libcohort_mpi.so")) +
                         glob.glob(os.path.join(build, "src", "libcohort_nccl.so")))
        for path in built + libraries + modules:
            shutil.copy2(os.path.realpath(path), os.path.join(package, os.path.basename(path)))
        # The COHORT_AS_GLOO hook (python/cohort_torch/as_gloo.py) goes to
        # site-packages itself, where Python reads .pth files at start.
        shutil.copy2(os.path.join(ROOT, "python", "site", "cohort_torch.pth"), os.path.dirname(package))


setup(
    name="cohort-torch",
    version="0.1.0",
    description="cohort as a torch.distributed backend: shared memory within a host, TCP between hosts",
    packages=["cohort_torch"],
    py_modules=["_cohort_torch_entry"],
    package_dir={"": "python"},
    ext_modules=[Extension("cohort_torch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=[f"torch=={torch_version()}"],
    # torch calls these at the end of `import torch`: "cohort" is a backend
    # name without `import cohort_torch` (python/_cohort_torch_entry.py).
    entry_points={"torch.backends": ["cohort = _cohort_torch_entry:register"]},
    python_requires=">=3.9",
    # setuptools' own scratch folder: build/ is the CMake build's.
    options={"build": {"build_base": "build-pip/setuptools"}},
    zip_safe=False,
)
