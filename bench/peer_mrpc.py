#!/usr/bin/env python3
"""The peer's side of the end-to-end MRPC comparison: HF run_glue's job done by the plain-PyTorch
twin of HF's models in ../shared/peer/torch_peer.py (same numbers, same speed).

Run it through bench/e2e_mrpc.sh, which starts it in run-peer's set-up (OpenBLAS-OpenMP,
tcmalloc, thread counts) and gives it token ids made by `bertfit tokenize` (bertfit's WordPiece
reproduces HF's ids on all of GLUE; tests/golden). The recipe is run_glue's defaults with the
seed's hyperparameters: every sample padded to --seq-len (pad_to_max_length), batch 32,
shuffled each epoch, AdamW (lr 2e-5, betas 0.9/0.999, eps 1e-8, no weight decay) with a linear
decay to 0 and no warmup, gradient clipping at norm 1, fp32 (or bf16 autocast with --bf16);
dev accuracy and F1 at the end. Prints one JSON object.

usage: peer_mrpc.py --model DIR --train ids.jsonl --train-labels L --dev ids.jsonl
                    --dev-labels L [--epochs 3] [--batch-size 32] [--seq-len 128] [--lr 2e-5]
                    [--threads N] [--bf16] [--seed 42]
  labels files: one integer per line, in the order of the ids files.
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/peer"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_peer  # noqa: E402


def load(ids_path, labels_path, T):
    rows = [json.loads(line) for line in open(ids_path)]
    labels = [int(line) for line in open(labels_path) if line.strip()]
    assert len(rows) == len(labels), f"{ids_path}: {len(rows)} rows, {labels_path}: {len(labels)}"
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    types = torch.zeros(len(rows), T, dtype=torch.long)
    real = 0
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        assert n <= T, f"{ids_path}: row {i} has {n} tokens > {T}"
        ids[i, :n] = torch.tensor(r["input_ids"])
        types[i, :n] = torch.tensor(r["token_type_ids"])
        mask[i, :n] = 1
        real += n
    return ids, mask, types, torch.tensor(labels), real


def main():
    p = argparse.ArgumentParser()
    for a in ("--model", "--train", "--train-labels", "--dev", "--dev-labels"):
        p.add_argument(a, required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    m = torch_peer.build(None, model_dir=a.model)
    tr = load(a.train, a.train_labels, a.seq_len)
    dv = load(a.dev, a.dev_labels, a.seq_len)
    n, B = tr[0].shape[0], a.batch_size
    steps_per_epoch = (n + B - 1) // B
    total = steps_per_epoch * a.epochs
    opt = torch.optim.AdamW(m.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, (total - s) / total))
    gen = torch.Generator().manual_seed(a.seed)
    m.train()
    t_train = time.perf_counter()
    losses = []
    for epoch in range(a.epochs):
        order = torch.randperm(n, generator=gen)
        for s in range(steps_per_epoch):
            idx = order[s * B:(s + 1) * B]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                logits = m(tr[0][idx], tr[1][idx], tr[2][idx])
            loss = F.cross_entropy(logits.float(), tr[3][idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            done = epoch * steps_per_epoch + s + 1
            if done % 20 == 0:
                el = time.perf_counter() - t_train
                print(f"peer step {done}/{total} loss {sum(losses[-20:]) / 20:.4f} "
                      f"{done * B / el:.2f} samples/s", file=sys.stderr, flush=True)
    train_s = time.perf_counter() - t_train
    m.eval()
    preds = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        for s in range(0, dv[0].shape[0], 64):
            preds.append(m(dv[0][s:s + 64], dv[1][s:s + 64], dv[2][s:s + 64]).float().argmax(-1))
    pred = torch.cat(preds)
    gold = dv[3]
    tp = int(((pred == 1) & (gold == 1)).sum())
    fp = int(((pred == 1) & (gold == 0)).sum())
    fn = int(((pred == 0) & (gold == 1)).sum())
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "bf16": a.bf16, "threads": a.threads,
        "epochs": a.epochs, "steps": total, "batch_size": B, "seq_len": a.seq_len,
        "train_seconds": train_s, "total_seconds": time.perf_counter() - t_start,
        "samples_per_s": n * a.epochs / train_s,
        "real_token_fraction": tr[4] / (n * a.seq_len),
        "final_loss": sum(losses[-20:]) / min(20, len(losses)),
        "eval_accuracy": float((pred == gold).float().mean()), "eval_f1": f1,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
