"""Tensor-parallel LLM inference on CPU (issue 40): Hugging Face
transformers generating from a random Llama made from a config (no hub),
one process against TP over gloo and TP over cohort, side by side.

    python3 bench/python/tp_generate.py [--reps 3] [--tp 2] [--tokens 64]

Needs build/python on PYTHONPATH (cohort_torch) and transformers. Each run
is a fresh torchrun job with one thread per rank; runs alternate between the
setups, REPS times. Prints tokens/s of greedy generation (TOKENS new tokens
after a 32-token prompt) and the prefill latency of a 512-token prompt,
medians, with the ratios the issue's targets speak of, and the hardware's
bound for TP (the same number of one-process jobs run at once, one per
core: they share the memory bandwidth decoding needs); checks that every
setup generated the same tokens.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tp_common import CONFIG, launch, load_llama, save_llama  # noqa: E402


def worker(backend, model_dir, tokens, out):
    torch, model, prompt, sync = load_llama(backend, model_dir)
    long_prompt = (torch.arange(512) * 37 % CONFIG["vocab_size"]).unsqueeze(0)
    with torch.no_grad():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, do_sample=False)
        sync()
        start = time.perf_counter()
        generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=tokens,
                                   min_new_tokens=tokens, do_sample=False)
        sync()
        gen_s = time.perf_counter() - start
        prefill = []
        for _ in range(3):
            sync()
            start = time.perf_counter()
            model(long_prompt)
            sync()
            prefill.append(time.perf_counter() - start)
    rank = torch.distributed.get_rank() if backend != "none" else 0
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"tokens": generated[0].tolist(), "tokens_per_s": tokens / gen_s,
                       "prefill_ms": 1000 * statistics.median(prefill)}, f)
    if backend != "none":
        torch.distributed.destroy_process_group()


def run(setup, nproc, model_dir, tokens, tmp):
    return launch(__file__, setup, nproc, [model_dir, tokens], os.path.join(tmp, f"{setup}.json"))


def run_concurrent(n, model_dir, tokens, tmp):
    """n one-process jobs at once, one per core: the hardware's bound for
    TP=n. Decoding streams every weight from memory once per token; a TP
    rank streams 1/n of them while n-1 other cores stream theirs, so TP=n
    can at best make n x the tokens/s of one such job, and prefill at best
    1/n of its latency. Returns that bound in the shape run() returns."""
    me = os.path.abspath(__file__)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    outs = [os.path.join(tmp, f"alone{i}.json") for i in range(n)]
    procs = [subprocess.Popen([sys.executable, me, "--worker", "none", model_dir, str(tokens), o], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for o in outs]
    for pr in procs:
        out, err = pr.communicate()
        if pr.returncode != 0:
            sys.exit(f"concurrent one-process job failed:\n{out[-2000:]}\n{err[-4000:]}")
    results = []
    for o in outs:
        with open(o) as f:
            results.append(json.load(f))
    return {"tokens": results[0]["tokens"],
            "tokens_per_s": n * statistics.median(r["tokens_per_s"] for r in results),
            "prefill_ms": statistics.median(r["prefill_ms"] for r in results) / n}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--tokens", type=int, default=64)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "llama")
        save_llama(model_dir)
        setups = ["none", "bound", "gloo", "cohort"]
        results = {s: [] for s in setups}
        for _ in range(args.reps):
            for s in setups:
                if s == "bound":
                    results[s].append(run_concurrent(args.tp, model_dir, args.tokens, tmp))
                else:
                    results[s].append(run(s, args.tp, model_dir, args.tokens, tmp))
    tokens = {s: results[s][0]["tokens"] for s in setups}
    same = all(r["tokens"] == tokens["none"] for s in setups for r in results[s])
    med = {s: (statistics.median(r["tokens_per_s"] for r in results[s]),
               statistics.median(r["prefill_ms"] for r in results[s])) for s in setups}
    names = {"none": "one process", "bound": f"bound for TP={args.tp}: {args.tp} one-process jobs at once, x{args.tp}",
             "gloo": f"TP={args.tp} over gloo", "cohort": f"TP={args.tp} over cohort"}
    print(f"# transformers TP generation on CPU: Llama {CONFIG['hidden_size']} hidden, "
          f"{CONFIG['num_hidden_layers']} layers, float32, 1 thread per rank; medians of {args.reps} runs\n")
    print("| run | tokens/s | x one process | x gloo | prefill 512 tokens (ms) | prefill x one process |")
    print("|---|---|---|---|---|---|")
    for s in setups:
        print(f"| {names[s]} | {med[s][0]:.1f} | {med[s][0] / med['none'][0]:.2f} | "
              f"{med[s][0] / med['gloo'][0]:.2f} | {med[s][1]:.0f} | {med['none'][1] / med[s][1]:.2f} |")
    print(f"\nTP over cohort reaches {med['cohort'][0] / med['bound'][0]:.2f} of the bound's tokens/s and "
          f"{med['bound'][1] / med['cohort'][1]:.2f} of its prefill speed. The bound: {args.tp} one-process "
          f"jobs run at once, one per core, share the memory bandwidth that decoding needs; TP={args.tp} moves "
          f"1/{args.tp} of the weights per rank, so at best {args.tp}x one such job.")
    print(f"\nsame tokens in every run: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
