"""cohort as a torch.distributed backend.

    import cohort_torch
    import torch.distributed as dist
    dist.init_process_group("cohort")   # env://, or init_method=, or store=

Importing this package registers the backend "cohort" for CPU tensors with
torch.distributed.Backend.register_backend (torch's extended API, so the
backend receives the store, group rank and size, timeout and group name
torch made for it). Every group torch makes with it, the default one and
each new_group (DeviceMesh's too), is a cohort group: shared memory
between ranks on one host, TCP between hosts.
"""

import torch.distributed as _dist

from ._C import ProcessGroupCohort, TCPStore

__all__ = ["ProcessGroupCohort", "TCPStore"]


def _create_backend(dist_backend_opts, backend_options=None):
    opts = dist_backend_opts
    return ProcessGroupCohort(opts.store, opts.group_rank, opts.group_size, opts.timeout, str(opts.group_id))


if "COHORT" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("cohort", _create_backend, extended_api=True, devices=["cpu"])
