# ddp_bench_torch.py: bench/ddp_bench.cc's twin on torch's own
# DistributedDataParallel over Gloo (torch 2.13 from pip; run it with that
# Python under torch.distributed.run). Same models, same steps, same output
# line.
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        return F.log_softmax(self.fc2(x), 1)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 2048)
        self.fc2 = nn.Linear(2048, 2048)
        self.fc3 = nn.Linear(2048, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.view(x.size(0), 784)))
        x = F.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--backend", default="gloo", choices=["gloo", "cohort"],
                   help="torch's DDP over Gloo (the anchor) or over cohort (import cohort_torch)")
    p.add_argument("--zero-grad", default="none", choices=["none", "in-place"],
                   help="none: drop the gradients (torch 2.x's default); in-place: zero them")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if a.backend == "cohort":
        import cohort_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(a.backend)
    model = Mlp() if a.model == "mlp" else Cnn()
    ddp = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=a.gradient_as_bucket_view)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=a.zero_grad == "none")
        F.nll_loss(ddp(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    # Synchronised and no_sync steps alternate, each timed alone (medians)
    # and started together (an untimed barrier first), as in ddp_bench.cc.
    sync_ms, local_ms = [], []
    for _ in range(a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        dist.barrier()
        t2 = time.perf_counter()
        with ddp.no_sync():
            step()
        t3 = time.perf_counter()
        sync_ms.append((t1 - t0) * 1e3)
        local_ms.append((t3 - t2) * 1e3)
    result = torch.tensor([statistics.median(sync_ms), statistics.median(local_ms)], dtype=torch.float64)
    dist.all_reduce(result, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        s, l = result.tolist()
        view = "+view" if a.gradient_as_bucket_view else ""
        name = "torch" if a.backend == "gloo" else "torch_over_cohort"
        print(f"ddp_bench {name}{view} world={dist.get_world_size()} batch={a.batch} "
              f"sync_ms={s:.2f} no_sync_ms={l:.2f} overhead_ms={s - l:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
