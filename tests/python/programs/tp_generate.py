"""Hugging Face transformers tensor-parallel generation on CPU, on a small
Llama made from a config (no download).

    python3 tp_generate.py make DIR            # writes the model to DIR
    torchrun --nproc-per-node 2 tp_generate.py BACKEND DIR OUT.json
    python3 tp_generate.py none DIR OUT.json   # one process, no TP

BACKEND is gloo or cohort: the program initialises torch.distributed with
it, then transformers shards the model by its tp_plan ("auto") over that
group. Rank 0 writes the generated tokens to OUT.json."""

import json
import sys

import torch
from leave import leave

torch.set_num_threads(1)
what, model_dir = sys.argv[1], sys.argv[2]

if what == "make":
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    LlamaForCausalLM(config).save_pretrained(model_dir)
    sys.exit(0)

from transformers import AutoModelForCausalLM  # noqa: E402

out = sys.argv[3]
kwargs = {}
if what != "none":
    if what == "cohort":
        import cohort_torch  # noqa: F401  (registers the backend)
    from transformers.distributed import DistributedConfig

    torch.distributed.init_process_group(what)
    kwargs["distributed_config"] = DistributedConfig(tp_plan="auto")
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kwargs)
model.eval()
prompt = (torch.arange(12) * 37 % 512).unsqueeze(0)
with torch.no_grad():
    tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24, do_sample=False)
rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
if rank == 0:
    backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else "none"
    q_proj = model.model.layers[0].self_attn.q_proj.weight
    local = q_proj.to_local() if hasattr(q_proj, "to_local") else q_proj
    with open(out, "w") as f:
        json.dump({"tokens": tokens[0].tolist(), "backend": backend, "q_proj_rows": local.shape[0]}, f)
if torch.distributed.is_initialized():
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
leave()  # without the interpreter's teardown: see leave.py
