"""cohort standing in for gloo: every process group torch makes for the
backend "gloo" (the default group, new_group, DeviceMesh's, the debug
wrapper's helper) is a cohort group, while torch and the program still see
the name "gloo". So an unmodified program or framework that asks for gloo
on CPU (PyTorch Lightning, accelerate, transformers choose it themselves)
runs on cohort by the user's choice alone:

    COHORT_AS_GLOO=1 python3 train.py          # with cohort_torch installed
    cohortrun --as-gloo ... train.py           # the same through cohortrun

importing cohort_torch with COHORT_AS_GLOO set calls install(); the
interpreter-start hooks (sitecustomize.py in the build's python folder,
cohort_torch.pth when installed) import it when the variable is set.

How: torch builds a gloo group by calling the name ProcessGroupGloo in
torch.distributed.distributed_c10d (a program that builds one itself calls
torch.distributed.ProcessGroupGloo, the same class), then checks the result with isinstance
and asks it for sequence numbers. install() replaces that name with a class
whose construction returns a cohort group and that counts cohort's (and
torch's real gloo ones) as its instances. torch's C++ side casts a group
named "gloo" to Gloo's class (DDP's logger does), so what the stand-in
makes names itself "cohort" there; docs/python.md lists what follows.
"""

import datetime as _datetime

import torch
import torch.distributed.distributed_c10d as _c10d

from ._C import ProcessGroupCohort, _cohort_process_group

__all__ = ["install", "installed"]

_real_gloo = getattr(_c10d, "ProcessGroupGloo", None)


def _is_cohort(obj):
    if isinstance(obj, ProcessGroupCohort):
        return True
    if not isinstance(obj, _c10d.ProcessGroup):
        return False
    try:
        return isinstance(obj._get_backend(torch.device("cpu")), ProcessGroupCohort)
    except RuntimeError:
        return False


class _GlooLike(type):
    """isinstance(x, ProcessGroupGloo) holds for torch's gloo backends and for
    what the stand-in makes: cohort backends, and ProcessGroups over one."""

    def __instancecheck__(cls, obj):
        return _is_cohort(obj) or (_real_gloo is not None and isinstance(obj, _real_gloo))

    def __subclasscheck__(cls, sub):
        return issubclass(sub, ProcessGroupCohort) or (_real_gloo is not None and issubclass(sub, _real_gloo))


class _Options:
    """Takes what torch writes into a gloo backend's options
    (global_ranks_in_group, group_name); cohort has its own."""


_built_directly = 0  # groups a program built itself: each gets its own name, the same on every rank


class ProcessGroupGloo(metaclass=_GlooLike):
    """Stands for torch's ProcessGroupGloo: constructing it makes a cohort
    group over the same store, rank, size and timeout. Like torch's, it
    takes a timeout or gloo's options (ProcessGroupGloo._Options: their
    _timeout and group_name; the _devices and _threads are gloo's, cohort
    chooses its own links and needs no threads of its own)."""

    Options = getattr(_real_gloo, "Options", None)
    _Options = getattr(_real_gloo, "_Options", None)
    Device = getattr(_real_gloo, "Device", None)

    def __new__(cls, store, rank, size, timeout=None, *args, **kwargs):
        import cohort_torch

        global _built_directly
        options = kwargs.pop("options", None)
        if options is None and timeout is not None and not isinstance(timeout, _datetime.timedelta):
            options, timeout = timeout, None
        if options is not None:
            timeout = getattr(options, "_timeout", None)
        if timeout is None:
            timeout = _c10d.default_pg_timeout
        group_name, backend_map = cohort_torch._group_being_made()
        if group_name is None:
            group_name = getattr(options, "group_name", "") or ""
        if not group_name:
            _built_directly += 1
            group_name = f"gloo.direct.{_built_directly}"
        made = ProcessGroupCohort(store, rank, size, timeout, group_name)
        made._set_profiling_name("gloo")  # the profiler's events, as torch's tests expect for gloo
        # A group that is gloo alone goes back as a ProcessGroup, which torch
        # keeps as it is: it names itself "cohort" to torch's C++ side. Named
        # "gloo" there, DDP's logger would read gloo's private state out of
        # cohort's backend (a crash). With another backend for another
        # device, torch makes the ProcessGroup and the backend goes back.
        if cohort_torch._only_backend(backend_map, "gloo"):
            return _cohort_process_group(store, made)  # its .options: install()
        made.options = _Options()
        return made

    @staticmethod
    def create_device(hostname="", interface="", lazy_init=None):
        if _real_gloo is None:
            raise RuntimeError("cohort_torch.as_gloo: torch has no gloo to make a device with")
        return _real_gloo.create_device(hostname=hostname, interface=interface, lazy_init=lazy_init)

    @staticmethod
    def create_default_device(lazy_init=None):
        return _real_gloo.create_default_device(lazy_init=lazy_init)


def installed():
    """Whether torch's gloo groups are cohort groups in this process."""
    return _c10d.ProcessGroupGloo is ProcessGroupGloo


def install():
    """From now on every group torch makes for "gloo" is a cohort group.
    Groups made before stay as they are. Idempotent."""
    if installed():
        return
    _c10d.ProcessGroupGloo = ProcessGroupGloo
    import torch.distributed as _dist

    _dist.ProcessGroupGloo = ProcessGroupGloo  # what a program builds itself
    # Gloo's devices are asked of a group's backend too (torch's DDP tests:
    # pg._get_backend(cpu).create_device(...)); static, as gloo's.
    ProcessGroupCohort.create_device = staticmethod(ProcessGroupGloo.create_device)
    ProcessGroupCohort.create_default_device = staticmethod(ProcessGroupGloo.create_default_device)
    # torch writes into the .options of what it constructed as gloo; a
    # ProcessGroup (the type torch checks exactly) has none and takes no
    # attributes, so ProcessGroups get a write-only one.
    if not hasattr(_c10d.ProcessGroup, "options"):
        _c10d.ProcessGroup.options = property(lambda self: _Options())
    # torch checks that gloo is there before making a gloo group.
    _c10d._GLOO_AVAILABLE = True
    _c10d.is_gloo_available = lambda: True
    _dist.is_gloo_available = _c10d.is_gloo_available
