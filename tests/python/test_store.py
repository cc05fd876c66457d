"""cohort's TcpStore as a torch Store from Python (cohort_torch.TCPStore):
torch's Store methods against a real server, and init_process_group with
it for "cohort" and for "gloo" in real processes."""

import datetime
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import cohort_torch


def test_torchs_store_methods_on_cohorts_server():
    server = cohort_torch.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=10))
    client = cohort_torch.TCPStore("127.0.0.1", server.port, timeout=datetime.timedelta(seconds=10))
    assert isinstance(client, dist.Store)
    client.set("k", "v")
    assert server.get("k") == b"v"
    assert client.add("n", 3) == 3 and server.add("n", 4) == 7
    assert client.compare_set("k", "v", "w") == b"w"
    assert client.compare_set("k", "nope", "x") == b"w"
    assert client.check(["k", "n"]) and not client.check(["missing"])
    client.append("k", "z")
    assert client.multi_get(["k", "n"]) == [b"wz", b"7"]
    client.multi_set(["a", "b"], ["1", "2"])
    assert server.get("b") == b"2"
    assert server.num_keys() >= 4
    assert client.delete_key("a") and not client.check(["a"])
    client.wait(["b"])
    with pytest.raises(dist.DistStoreError, match="missing"):
        client.wait(["missing"], datetime.timedelta(milliseconds=200))


def test_a_bad_port_is_refused_naming_it():
    with pytest.raises(ValueError, match="port 70000"):
        cohort_torch.TCPStore("127.0.0.1", 70000)


def _rank(rank, size, port, backend, results):
    store = cohort_torch.TCPStore("127.0.0.1", port, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group(backend, store=store, rank=rank, world_size=size)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    results.put((rank, t.item()))
    dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["cohort", "gloo"])
def test_init_process_group_meets_through_it(backend):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    # The server is the parent's, on port 0: a port picked here and bound by
    # rank 0 later could be taken in between by another test's server.
    server = cohort_torch.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=60),
                                   wait_for_workers=False)
    procs = [ctx.Process(target=_rank, args=(r, 3, server.port, backend, results)) for r in range(3)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in range(3))
    for p in procs:
        p.join(timeout=30)
    assert got == {0: 6.0, 1: 6.0, 2: 6.0}
    assert [p.exitcode for p in procs] == [0, 0, 0]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
