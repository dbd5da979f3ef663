#!/usr/bin/env python3
"""transformers 4.28.1's DebertaV2ForSequenceClassification as a speed peer (bench/deberta_vs_torch.sh).

  deberta_peer.py bench-train --model DIR --batch-size B --seq-len T --threads N [--steps S] [--warmup W]
  deberta_peer.py export-onnx --model DIR --out FILE.onnx [--int8]

The model is the folder's (config.json + model.safetensors, e.g. made by `bertfit init --arch deberta-v2`),
loaded by AutoModelForSequenceClassification: the same weights and configuration bertfit runs.
bench-train: AdamW steps on random full-length batches under torch.autocast("cpu", bfloat16) as
../shared/peer/torch_peer.py's bench-train (forward, cross-entropy, backward, step, zero_grad timed; median).
export-onnx: torch.onnx.export of the class (opset 14, dynamic batch and sequence axes; inputs input_ids and
attention_mask; output logits); --int8 applies ../shared/peer/ort_export.py's quantize_dynamic (onnxruntime's
default dynamic quantisation of every MatMul with a constant weight) so that ../shared/peer/ort_bench.mjs
times it as run-ort-peer's int8 models.
Needs the oracle (source /work/hf-oracle/env.sh; /usr/bin/python3 with Debian's python3-torch) and, for
export-onnx, python3-onnx. Never run in tests.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification


def load(model_dir):
    m = AutoModelForSequenceClassification.from_pretrained(model_dir)
    return m


def cmd_bench_train(a):
    torch.set_num_threads(a.threads)
    m = load(a.model)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    gen = torch.Generator().manual_seed(0)
    vocab, labels_n = m.config.vocab_size, m.config.num_labels
    times = []
    for step in range(a.warmup + a.steps):
        ids = torch.randint(5, vocab, (a.batch_size, a.seq_len), generator=gen)
        mask = torch.ones(a.batch_size, a.seq_len, dtype=torch.long)
        labels = torch.randint(0, labels_n, (a.batch_size,), generator=gen)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(input_ids=ids, attention_mask=mask).logits
            loss = F.cross_entropy(logits.float(), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "mode": "train", "bf16": True,
                      "threads": a.threads, "batch_size": a.batch_size, "seq_len": a.seq_len,
                      "ms_per_step": med * 1e3, "ms_min": times[0] * 1e3}))


def cmd_export_onnx(a):
    m = load(a.model)
    m.eval()
    m.config.return_dict = False
    ids = torch.randint(5, 1000, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch"}
    tmp = a.out + ".fp32" if a.int8 else a.out
    with torch.no_grad():
        torch.onnx.export(m, (ids, mask), tmp, input_names=names, output_names=["logits"],
                          dynamic_axes=axes, opset_version=14, do_constant_folding=True)
    if a.int8:
        sys.path.insert(0, a.peer_dir)
        import ort_export  # noqa: E402  (../shared/peer/ort_export.py)
        ort_export.quantize_dynamic(tmp)
        os.replace(tmp, a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("bench-train")
    p.add_argument("--model", required=True)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.set_defaults(fn=cmd_bench_train)
    p = sub.add_parser("export-onnx")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--int8", action="store_true")
    p.add_argument("--peer-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "shared", "peer"))
    p.set_defaults(fn=cmd_export_onnx)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
