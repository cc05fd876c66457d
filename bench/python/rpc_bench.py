# rpc_bench.py: torch 2.13's torch.distributed.rpc (the TensorPipe agent)
# between two workers, measured as bench/rpc_bench.cc measures cohort's.
# Run it under cohortrun or torch.distributed.run with 2 processes
# (env://); worker 0 calls, worker 1 answers. Prints from worker 0:
#   rpc_bench torch noop_us=.. echo4k_us=.. echo1m_us=.. echo16m_us=..
#   echo1m_gbps=.. echo16m_gbps=.. async_calls_per_s=..
import argparse
import os
import statistics
import time

import torch
import torch.distributed.rpc as rpc


def noop():
    return None


def echo(t):
    return t


def per_call_us(reps, calls, f):
    for _ in range(max(1, calls // 10)):
        f()
    rounds = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        rounds.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(rounds)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--async", dest="async_calls", type=int, default=20000)
    a = p.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=16, init_method="env://")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                 rpc_backend_options=options)
    if rank == 0:
        noop_us = per_call_us(a.reps, 2000, lambda: rpc.rpc_sync("worker1", noop))

        def echo_us(nbytes, calls):
            t = torch.rand(nbytes // 4)
            return per_call_us(a.reps, calls, lambda: rpc.rpc_sync("worker1", echo, args=(t,)))

        e4k, e1m, e16m = echo_us(4 << 10, 1000), echo_us(1 << 20, 200), echo_us(16 << 20, 20)
        rates = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            futures = [rpc.rpc_async("worker1", noop) for _ in range(a.async_calls)]
            for f in futures:
                f.wait()
            rates.append(a.async_calls / (time.perf_counter() - t0))
        print(f"rpc_bench torch noop_us={noop_us:.2f} echo4k_us={e4k:.2f} echo1m_us={e1m:.1f} "
              f"echo16m_us={e16m:.0f} echo1m_gbps={2 * (1 << 20) / e1m / 1e3:.2f} "
              f"echo16m_gbps={2 * (16 << 20) / e16m / 1e3:.2f} "
              f"async_calls_per_s={statistics.median(rates):.0f}", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    main()
