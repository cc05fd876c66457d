"""torch's entry point into an installed cohort_torch: with the wheel (or
`pip install .`) installed, `init_process_group("cohort")` works without
`import cohort_torch`.

torch calls every entry point of the group "torch.backends" at the end of
`import torch` (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0). register() only
names the backend: the extension and its libraries load when the first
cohort group is made, so a program that never asks for cohort pays for
nothing but this file. It sits beside the package, not in it: importing
cohort_torch.anything would run cohort_torch/__init__.py, which loads the
extension."""

__all__ = ["register"]


def _create_backend(dist_backend_opts, backend_options=None):
    import cohort_torch

    return cohort_torch._create_backend(dist_backend_opts, backend_options)


def register():
    import os

    import torch.distributed as dist

    if not dist.is_available():
        return  # a torch without distributed
    if os.environ.get("COHORT_AS_GLOO", "0") not in ("", "0"):
        # The stand-in for gloo (cohort_torch/as_gloo.py). cohort_torch.pth
        # does this at interpreter start where torch is already on the path;
        # in a virtual environment that sees the system's torch, it is not
        # yet when .pth files run, so the stand-in comes in here.
        import cohort_torch  # noqa: F401  (installs it, and registers "cohort")
    if getattr(dist.Backend, "COHORT", None) is None:  # not when cohort_torch was imported first
        dist.Backend.register_backend("cohort", _create_backend, extended_api=True, devices=["cpu"])
