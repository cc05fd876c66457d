"""What the tensor-parallel benchmarks share (tp_generate.py, tp_breakdown.py,
tp_train.py): the random Llama's config, how a worker joins its job and
loads the model with transformers' tensor-parallel plan, and how a setup is
launched (one process, or a torchrun job of N ranks) and its result read.
"""

import json
import os
import subprocess
import sys

CONFIG = dict(vocab_size=8192, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
              num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=1024)


def join(backend):
    """One thread per rank; joins the job over `backend` ("none": one
    process, no job). Returns torch and a barrier (a no-op alone)."""
    import torch

    torch.set_num_threads(1)
    if backend == "none":
        return torch, (lambda: None)
    if backend == "cohort":
        import cohort_torch  # noqa: F401
    torch.distributed.init_process_group(backend)
    return torch, torch.distributed.barrier


def load_llama(backend, model_dir):
    """Joins the job and loads the model from `model_dir`, split by
    transformers' tensor-parallel plan when there is a job. Returns torch,
    the model, a prompt of 32 tokens and the barrier."""
    torch, sync = join(backend)
    from transformers import AutoModelForCausalLM

    kwargs = {}
    if backend != "none":
        from transformers.distributed import DistributedConfig

        kwargs["distributed_config"] = DistributedConfig(tp_plan="auto")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kwargs).eval()
    prompt = (torch.arange(32) * 101 % CONFIG["vocab_size"]).unsqueeze(0)
    return torch, model, prompt, sync


def save_llama(model_dir):
    """Makes the random Llama from CONFIG (seed 0) and saves it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**CONFIG)).save_pretrained(model_dir)


def launch(script, setup, nproc, args, out):
    """Runs `script --worker SETUP ARGS... OUT` alone ("none") or as a
    torchrun job of `nproc` ranks, one thread each, and returns the JSON
    that rank 0 wrote to `out`. Exits naming the setup when it fails."""
    cmd = [os.path.abspath(script), "--worker", setup] + [str(a) for a in args] + [out]
    if setup == "none":
        cmd = [sys.executable] + cmd
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("COHORT_AS_GLOO", None)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{setup} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    with open(out) as f:
        return json.load(f)
