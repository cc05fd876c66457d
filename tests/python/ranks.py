"""The multi-process harness of the Python tests: ranks as real processes
started by torch.multiprocessing, joined by init_process_group over env://,
each running one function of a test module and sending back what it
returned.

The job's store is hosted by the parent, as torchrun's agent hosts it
(TORCHELASTIC_USE_AGENT_STORE=True: every rank is a client). The parent
opens it on port 0, so the port is never free between being picked and
being bound: when rank 0 bound a port picked earlier, another test's server
could take it in between, and rank 1 then joined the other test's store
(seen once in CI: rank 1's multi_get ended with "Failed to recv" when the
other job finished).

The processes come from a fork server that imported torch and cohort_torch
once (multiprocessing's "forkserver", with those modules preloaded): each
rank is a fresh fork of a process that has run no torch operation and
started no thread, as a spawned one is, without the two seconds of
`import torch` that every spawned rank paid (most of the Python suites'
time)."""

import datetime
import os
import queue
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, size, port, fn, results, backend, env):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    os.environ.update(env)
    import cohort_torch  # noqa: F401  (registers the backend; preloaded by the fork server)

    torch.set_num_threads(1)
    try:
        # Inside: a rank whose init fails says why at once, where the parent
        # would otherwise wait out its timeout for a result that never comes.
        dist.init_process_group(backend, rank=rank, world_size=size, timeout=datetime.timedelta(seconds=60))
        results.put((rank, fn(rank, size)))
    except BaseException as e:  # the parent reports it, with the rank
        results.put((rank, f"error: {type(e).__name__}: {e}"))
    finally:
        code = 0
        try:
            if dist.is_initialized():  # fn may have destroyed it itself
                dist.destroy_process_group()
        except BaseException as e:
            print(f"rank {rank}: destroy_process_group raised {type(e).__name__}: {e}", flush=True)
            code = 1
        # Leave without the interpreter's teardown. torch's Gloo may still be
        # destroying a finished Work on its own thread, and when that Work
        # holds a tensor with a Python object, its thread takes the GIL while
        # the interpreter finalizes, is made to exit, and the unwinding
        # through a noexcept destructor aborts the process ("terminate called
        # without an active exception"; a core of it showed
        # ProcessGroupGloo::runLoop -> ~AsyncAllgatherCoalescedWork ->
        # decref_pyobject -> take_gil -> pthread_exit). Seen in 2 of ~40 runs
        # of fully_shard over gloo.
        results.close()
        results.join_thread()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_ranks(fn, size, backend="cohort", killed=(), env=None):
    """Runs fn(rank, size) in `size` processes joined by init_process_group
    (`backend`, env://, with `env` added to each one's environment); returns
    {rank: what fn returned}. Ranks in `killed` are expected to die by
    SIGKILL and return nothing."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "cohort_torch"])
    results = ctx.Queue()
    store = dist.TCPStore("127.0.0.1", 0, size, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    port = store.port
    procs = [
        ctx.Process(target=_entry, args=(r, size, port, fn, results, backend, dict(env or {})))
        for r in range(size)
    ]
    for p in procs:
        p.start()
    out = {}
    try:
        for _ in range(size - len(killed)):
            try:
                rank, value = results.get(timeout=120)
            except queue.Empty:
                states = ", ".join(f"rank {r}: " + ("still running" if p.is_alive() else f"exit code {p.exitcode}")
                                   for r, p in enumerate(procs) if r not in out)
                raise AssertionError(f"no result within 120 s from ranks that owe one ({states})") from None
            out[rank] = value
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    for rank, value in out.items():
        assert not (isinstance(value, str) and value.startswith("error:")), f"rank {rank}: {value}"
    expected = [-9 if r in killed else 0 for r in range(size)]
    assert [p.exitcode for p in procs] == expected
    return out
