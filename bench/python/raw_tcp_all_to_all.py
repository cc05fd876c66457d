"""raw_tcp_all_to_all: the all_to_all that plain TCP sockets make, as an
anchor for bench/multi_host.sh. No collective library: every rank opens one
TCP connection to every other rank, and a call sends each peer its block and
receives each peer's block, all at once, one kernel thread per flow
(sendall / recv_into on blocking sockets). What it reaches is what TCP over
these links allows when every host sends to every other at once, whatever a
library does on top.

One process per rank, started like bench/python/host_collectives.py (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; ranks find each other through a
torch TCPStore on MASTER_PORT + 1). Rank 0 prints one line per size, in
host_collectives.py's format and sizes (each rank's whole send buffer),
from MIN_BYTES to MAX_BYTES by 4x:

    all_to_all size_bytes time_us

the slowest rank's median call. Python threads cost tens of microseconds a
call, so only sizes of a megabyte and up say anything about the network.

With LINK_BITS (the host link's rate, bits/s) and RANKS_PER_HOST, every
connection is paced (SO_MAX_PACING_RATE, the kernel's TCP pacing) to an
even share of the link: LINK_BITS over the number of streams leaving a
host, (WORLD_SIZE - RANKS_PER_HOST) x RANKS_PER_HOST. Unpaced, each stream
crosses two shaped links (its sender's and its receiver's) and TCP shares
neither evenly; paced, none outruns its share.

    raw_tcp_all_to_all.py MIN_BYTES MAX_BYTES [LINK_BITS RANKS_PER_HOST]
"""

import os
import socket
import statistics
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist

SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux; Python 3.11 lacks the name


def own_address(towards):
    """The address this host reaches `towards` from (its link's address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((towards, 9))
        return s.getsockname()[0]


def connect_all(store, rank, world, master):
    """One connection to every other rank: lower ranks accept, higher connect."""
    listener = socket.socket()
    listener.bind((own_address(master), 0))
    listener.listen(world)
    host, port = listener.getsockname()
    store.set(f"addr{rank}", f"{host}:{port}")
    peers = {}
    for other in range(rank + 1, world):
        host, port = store.get(f"addr{other}").decode().rsplit(":", 1)
        c = socket.create_connection((host, int(port)))
        c.sendall(rank.to_bytes(4, "little"))
        peers[other] = c
    for _ in range(rank):
        c, _ = listener.accept()
        peers[int.from_bytes(receive_exactly(c, 4), "little")] = c
    listener.close()
    for c in peers.values():
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return peers


def receive_exactly(conn, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = conn.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return buf


def all_to_all(peers, block):
    payload = bytes(block)
    threads = [threading.Thread(target=c.sendall, args=(payload,)) for c in peers.values()]
    threads += [threading.Thread(target=receive_exactly, args=(c, block)) for c in peers.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    master = os.environ["MASTER_ADDR"]
    store = dist.TCPStore(master, int(os.environ["MASTER_PORT"]) + 1, world, rank == 0,
                          timeout=timedelta(seconds=120))
    peers = connect_all(store, rank, world, master)
    if len(sys.argv) > 4:
        link_bits, per_host = float(sys.argv[3]), int(sys.argv[4])
        share = int(link_bits / 8 / ((world - per_host) * per_host))
        for c in peers.values():
            c.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, share)  # bytes/s
    size = max(lo, 4 * world)
    while size <= hi:
        block = size // world
        count = max(3, min(200, int(2e8 // size)))  # as host_collectives.py
        for _ in range(2):
            all_to_all(peers, block)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            all_to_all(peers, block)
            times.append(time.perf_counter() - start)
        store.set(f"median{size}.{rank}", str(statistics.median(times)))
        if rank == 0:
            slowest = max(float(store.get(f"median{size}.{r}")) for r in range(world))
            print(f"all_to_all {block * world} {slowest * 1e6:.1f}", flush=True)
        size *= 4
    store.set(f"done{rank}", "1")
    store.wait([f"done{r}" for r in range(world)])  # rank 0 holds the store


if __name__ == "__main__":
    main()
