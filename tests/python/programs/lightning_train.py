"""PyTorch Lightning DDP on CPU, 2 processes, logging with sync_dist=True
(Lightning averages with ReduceOp.AVG for every backend but gloo).

    python3 lightning_train.py BACKEND OUT.json

BACKEND is gloo or cohort (DDPStrategy's process_group_backend); rank 0
writes the per-step losses and the logged, synchronised metrics to OUT.json.
Lightning starts rank 1 itself by running this script again."""

import json
import sys

import torch
from leave import leave
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy

backend, out = sys.argv[1], sys.argv[2]
if backend == "cohort":
    import cohort_torch  # noqa: F401  (registers the backend)


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        self.log("batch_rows", torch.tensor(x.shape[0], dtype=torch.int64), sync_dist=True, reduce_fx="mean")
        self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.mse_loss(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 8, generator=g)
    return TensorDataset(x, x.sum(dim=1, keepdim=True) * 0.5)


model = Regression()
trainer = pl.Trainer(
    accelerator="cpu",
    devices=2,
    strategy=DDPStrategy(process_group_backend=backend),
    max_epochs=2,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(model, DataLoader(data(1), batch_size=8), DataLoader(data(2), batch_size=16))
if trainer.global_rank == 0:
    c10d = torch.distributed.distributed_c10d
    with open(out, "w") as f:
        json.dump({"losses": model.losses, "world": trainer.world_size,
                   "backend": torch.distributed.get_backend(),
                   "pg_class": type(c10d._get_default_group()._get_backend(torch.device("cpu"))).__name__,
                   "metrics": {k: float(v) for k, v in trainer.callback_metrics.items()}}, f)
leave()  # without the interpreter's teardown: see leave.py
