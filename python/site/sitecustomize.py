"""cohort's interpreter-start hook for the build tree: a Python started with
build/python on PYTHONPATH runs this file. When COHORT_AS_GLOO is set (to
anything but 0), it imports cohort_torch, which makes every process group
torch creates for "gloo" a cohort group (cohort_torch/as_gloo.py); otherwise
it does nothing and costs nothing. Then it runs the next sitecustomize on the
path, if there is one, since this file hides it."""

import os
import sys

if os.environ.get("COHORT_AS_GLOO", "0") not in ("", "0"):
    try:
        import torch  # noqa: F401
    except ImportError:
        pass  # another Python (a tool's, without torch): nothing to stand in for
    else:
        import cohort_torch  # noqa: F401  (installs the stand-in)


def _run_the_hidden_one():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "sitecustomize.py")
        if os.path.abspath(os.path.dirname(candidate)) == here or not os.path.isfile(candidate):
            continue
        with open(candidate, "rb") as f:
            code = compile(f.read(), candidate, "exec")
        exec(code, {"__name__": "sitecustomize", "__file__": candidate})
        return


_run_the_hidden_one()
