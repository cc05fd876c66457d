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

import datetime as _datetime
import math as _math
import os as _os
import sys as _sys

import torch as _torch
import torch.distributed as _dist

from ._C import ProcessGroupCohort, TCPStore, _bind_from_environment, _cohort_process_group

__all__ = ["ProcessGroupCohort", "TCPStore", "empty_symmetric", "monitored_barrier", "stragglers"]


def _cohort_backend(group, what):
    """The ProcessGroupCohort under `group` (None: the default group)."""
    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    if pg is _dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"cohort_torch.{what}: this rank is not a member of the group")
    backend = pg._get_backend(_torch.device("cpu"))
    if not isinstance(backend, ProcessGroupCohort):
        raise ValueError(
            f"cohort_torch.{what} needs a group of the 'cohort' backend, got '{pg._get_backend_name()}'"
        )
    return backend


def empty_symmetric(shape, dtype=_torch.float32, group=None):
    """A zero-filled tensor that the group's other ranks on this host map
    too: torch.distributed collectives on it (over "cohort") read the other
    ranks' data in place instead of copying it through a shared buffer.

    Collective: every rank of `group` calls it in the same order with the
    same shape and dtype. Where ranks cannot share memory (other hosts,
    shared memory off) the tensor is ordinary memory and everything works
    the same. The memory lives as long as the tensor or any view of it.
    """
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"cohort_torch.empty_symmetric: negative size in shape {shape}")
    itemsize = _torch.empty((), dtype=dtype).element_size()
    block = _cohort_backend(group, "empty_symmetric")._alloc_symmetric(_math.prod(shape) * itemsize)
    return block.view(dtype).view(shape)


def stragglers(group=None):
    """Who the ranks of `group` (None: the default group) wait for, as a
    dict (docs/stragglers.md): this rank's own counts ("collectives",
    "busy_s", "steps_per_s") and the group's "summary", which its rank 0
    joins from every rank's times each COHORT_STRAGGLER_INTERVAL_S: per
    rank how often it arrived last, how long the others waited for it
    ("waited_for_s"), its own wait, its lateness percentiles and host; the
    rank named "straggler" (-1: none); and bus bandwidth per collective and
    size. "summary" is None until the first join. Reads only what this
    process holds: no collective, no store call.
    """
    import json

    return json.loads(_cohort_backend(group, "stragglers")._stragglers())


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for "cohort" groups: rank 0 waits
    for every other rank and raises naming the first one (or, with
    wait_all_ranks, every one) that did not arrive within `timeout` (a
    timedelta or seconds; None: the group's).

    torch's own refuses every backend but gloo, and cohort leaves it as it
    is: importing cohort_torch replaces none of torch's functions. Under
    COHORT_AS_GLOO the groups say "gloo", and torch's own runs this one."""
    backend = _cohort_backend(group, "monitored_barrier")
    if timeout is None:  # the group's (torch: unset is -1, zero is zero)
        timeout = _datetime.timedelta(milliseconds=-1)
    elif isinstance(timeout, (int, float)):
        timeout = _datetime.timedelta(seconds=timeout)
    backend.monitored_barrier(timeout, wait_all_ranks)


def _group_being_made():
    """(group name, {device: backend name}) of the group torch is making
    when its caller was called by torch's _new_process_group_helper (the
    function that constructs backends), read from that function's locals;
    (None, None) otherwise (another caller, such as the debug wrapper's
    helper group, or torch's code no longer has them), and the callers then
    take the safe way."""
    frame = _sys._getframe(2)
    config = frame.f_locals.get("backend_config") if frame is not None else None
    if config is None or not hasattr(config, "get_device_backend_map"):
        return None, None
    return str(frame.f_locals.get("group_name")), dict(config.get_device_backend_map())


def _only_backend(backend_map, name):
    return backend_map is not None and set(backend_map.values()) == {name}


def _bind_rank():
    """Binds this rank to its share of the host's cores as COHORT_BIND says
    (once a process; torchrun binds nothing, cohortrun binds before the
    program starts), and keeps torch's intra-op threads within the CPUs the
    rank may run on, whoever bound it: more threads than those CPUs only
    take turns on them."""
    _bind_from_environment()
    cpus = len(_os.sched_getaffinity(0))
    if _torch.get_num_threads() > cpus:
        _torch.set_num_threads(cpus)


def _create_backend(dist_backend_opts, backend_options=None):
    opts = dist_backend_opts
    _bind_rank()
    backend = ProcessGroupCohort(opts.store, opts.group_rank, opts.group_size, opts.timeout, str(opts.group_id))
    # torch keeps a ProcessGroup that the creator returns as it is; cohort's
    # names itself "cohort" where torch's would say "custom" (DDP's logging
    # data). With another backend for another device, torch must make the
    # ProcessGroup itself, so the backend alone goes back.
    if _only_backend(_group_being_made()[1], "cohort"):
        return _cohort_process_group(opts.store, backend)
    return backend


# Unless an installed copy's entry point (python/_cohort_torch_entry.py)
# registered the name already, at `import torch`.
if getattr(_dist.Backend, "COHORT", None) is None:
    _dist.Backend.register_backend("cohort", _create_backend, extended_api=True, devices=["cpu"])

if _os.environ.get("COHORT_AS_GLOO", "0") not in ("", "0"):
    from . import as_gloo as _as_gloo

    _as_gloo.install()
