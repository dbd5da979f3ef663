#!/usr/bin/env python3
"""transformers' ModernBertForSequenceClassification as a speed peer (bench/modernbert_vs_torch.sh).

  modernbert_peer.py bench-train --src DIR --model DIR --batch-size B --seq-len T --threads N [--steps S] [--warmup W]
  modernbert_peer.py bench-infer --src DIR --model DIR --batch-size B --seq-len T --threads N [--steps S] [--warmup W]

--src holds transformers' own modeling_modernbert.py and configuration_modernbert.py (the commit
../shared/golden/MODERNBERT.md names), imported over transformers 4.28.1 by
../shared/peer/hf-oracle/modernbert_compat.py exactly as the golden data was made, attention "eager" (the
T × T additive mask of global and sliding-window layers). --model is the folder bertfit runs (config.json +
model.safetensors, e.g. made by `bertfit init --arch modernbert`): the same weights and configuration.
bench-train: AdamW steps on random full-length batches under torch.autocast("cpu", bfloat16) (forward,
cross-entropy, backward, step, zero_grad timed; median). bench-infer: fp32 forwards under no_grad (median).
Needs the oracle (source /work/hf-oracle/env.sh; /usr/bin/python3 with Debian's python3-torch). Never run in tests.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


def load(a):
    sys.path.insert(0, a.compat_dir)
    import modernbert_compat  # noqa: E402  (../shared/peer/hf-oracle/modernbert_compat.py)
    _, modeling, _ = modernbert_compat.install(a.src)
    return modeling.ModernBertForSequenceClassification.from_pretrained(a.model)


def batches(m, a):
    gen = torch.Generator().manual_seed(0)
    vocab, labels_n = m.config.vocab_size, m.config.num_labels
    while True:
        ids = torch.randint(5, vocab, (a.batch_size, a.seq_len), generator=gen)
        mask = torch.ones(a.batch_size, a.seq_len, dtype=torch.long)
        yield ids, mask, torch.randint(0, labels_n, (a.batch_size,), generator=gen)


def report(a, mode, bf16, times):
    times.sort()
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "mode": mode, "bf16": bf16,
                      "threads": a.threads, "batch_size": a.batch_size, "seq_len": a.seq_len,
                      "ms_per_step": times[len(times) // 2] * 1e3, "ms_min": times[0] * 1e3}))


def layer_norm_in_fp32():
    # torch 1.13's CPU autocast leaves layer_norm to its inputs' types, and the compat layer's
    # LayerNorm(bias=False) then meets a bf16 input with an fp32 weight (an error): the norm runs
    # in fp32 on the input cast up, as autocast does on GPUs and torch >= 2 on CPUs.
    def forward(self, x):
        return F.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps)
    torch.nn.LayerNorm.forward = forward


def cmd_bench_train(a):
    torch.set_num_threads(a.threads)
    layer_norm_in_fp32()
    m = load(a)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    data = batches(m, a)
    times = []
    for step in range(a.warmup + a.steps):
        ids, mask, labels = next(data)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(input_ids=ids, attention_mask=mask).logits
            loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    report(a, "train", True, times)


def cmd_bench_infer(a):
    torch.set_num_threads(a.threads)
    m = load(a)
    m.eval()
    data = batches(m, a)
    times = []
    with torch.no_grad():
        for step in range(a.warmup + a.steps):
            ids, mask, _ = next(data)
            t0 = time.perf_counter()
            m(input_ids=ids, attention_mask=mask)
            if step >= a.warmup:
                times.append(time.perf_counter() - t0)
    report(a, "infer", False, times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    for name, fn in (("bench-train", cmd_bench_train), ("bench-infer", cmd_bench_infer)):
        p = sub.add_parser(name)
        p.add_argument("--src", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--batch-size", type=int, default=32)
        p.add_argument("--seq-len", type=int, default=128)
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--warmup", type=int, default=1)
        p.add_argument("--steps", type=int, default=3)
        p.add_argument("--compat-dir", default=os.path.join(here, "..", "..", "shared", "peer", "hf-oracle"))
        p.set_defaults(fn=fn)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
