"""join_gloo: the Gloo side of bench/join_bench.sh. Starts, imports torch,
says "ready", waits to be released (a shared lock on RELEASE_FILE, which
the script holds exclusively until every worker is ready), then joins a
Gloo group (rank 0 hosts torch's TCPStore at JOIN_STORE_PORT, as
init_process_group's tcp:// does) and passes one barrier, printing the
wall time it finished. Python's start and `import torch` happen before
the release, so they are not in the time.
"""

import fcntl
import os
import time

import torch.distributed as dist

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print("ready", flush=True)
with open(os.environ["RELEASE_FILE"]) as release:
    fcntl.flock(release, fcntl.LOCK_SH)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{os.environ['JOIN_STORE_PORT']}", rank=rank, world_size=size
    )
    dist.barrier()
    print(f"done {time.time():.6f}", flush=True)
dist.destroy_process_group()
