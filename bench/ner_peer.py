#!/usr/bin/env python3
"""The peer's side of the CoNLL-2003 token-classification comparison (bench/ner_conll.sh):
transformers 4.28.1's BertForTokenClassification trained as examples/pytorch/token-classification/
run_ner.py trains it, scored with seqeval's own code.

Run it through bench/ner_conll.sh, which starts it in run-peer's set-up (OpenBLAS-OpenMP, tcmalloc,
thread counts) with the HF oracle's PYTHONPATH and the seqeval sources. The job, held to what
`bertfit train --no-shuffle` does with the same flags:
  * data: CoNLL lines (word first, tag last), a sentence ends at a blank or -DOCSTART- line; the
    labels are run_ner's sorted tag list of the training file;
  * tokens: BertTokenizer (use_fast=False), each word tokenized alone as is_split_into_words=True
    does (checked against it); the first sub-token of a word carries its tag, the others -100
    (label_all_tokens=False); words are kept whole while their sub-tokens fit in --max-seq-len
    minus [CLS] and [SEP] (bertfit's whole-word truncation); sentences without a tagged token are
    dropped (bertfit drops them: nothing to learn);
  * order: file order, consecutive batches of --batch-size (no shuffling), each padded to its
    longest sentence rounded up to a multiple of 8 (DataCollatorForTokenClassification);
  * optimiser: Trainer's default (adamw_hf: transformers.optimization.AdamW, betas 0.9/0.999,
    eps 1e-8, weight decay on all but biases and LayerNorm weights), a linear warmup of
    ceil(--warmup-ratio x steps) then linear decay to 0, gradient clipping at norm 1, fp32;
  * evaluation: argmax at the tagged positions of the test file, seqeval's default mode
    (precision_score, recall_score, f1_score, accuracy_score; as run_ner's compute_metrics).
The model folder must already hold the token-classification head to start from (the one bertfit
starts from: bench/ner_conll.sh writes it with `bertfit train --lr 0 --max-steps 1`); the script
fails if from_pretrained starts a new head instead. Prints one JSON object.

usage: ner_peer.py --model DIR --train F --test F [--max-steps N] [--batch-size 32] [--lr 5e-5]
                   [--warmup-ratio 0] [--weight-decay 0] [--max-seq-len 128] [--threads N]
                   [--seed 42] [--predictions OUT.jsonl]
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
from transformers import BertForTokenClassification, BertTokenizer
from transformers.optimization import AdamW, get_linear_schedule_with_warmup


def read_conll(path):
    sentences, words, tags = [], [], []
    for line in open(path, encoding="utf-8-sig"):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        cols = line.split()
        words.append(cols[0])
        tags.append(cols[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def encode(tokenizer, sentences, label2id, max_len, check_every=1):
    """[(input_ids, labels)], and the number of words cut by whole-word truncation."""
    room = max_len - 2
    out, cut = [], 0
    for i, (words, tags) in enumerate(sentences):
        pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]
        kept, used = 0, 0
        while kept < len(words) and used + len(pieces[kept]) <= room:
            used += len(pieces[kept])
            kept += 1
        cut += len(words) - kept
        ids, labels = [tokenizer.cls_token_id], [-100]
        for w in range(kept):
            for j, t in enumerate(pieces[w]):
                ids.append(t)
                labels.append(label2id[tags[w]] if j == 0 else -100)
        ids.append(tokenizer.sep_token_id)
        labels.append(-100)
        if i % check_every == 0:  # run_ner's own call gives the same ids
            ref = tokenizer(words[:kept], is_split_into_words=True)["input_ids"]
            assert ref == ids, f"sentence {i}: {ref} != {ids}"
        if any(l >= 0 for l in labels):
            out.append((ids, labels))
    return out, cut


def collate(batch, pad_id, multiple=8):
    T = max(len(ids) for ids, _ in batch)
    T = (T + multiple - 1) // multiple * multiple
    ids = torch.full((len(batch), T), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), T), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), T), dtype=torch.long)
    for i, (x, y) in enumerate(batch):
        ids[i, :len(x)] = torch.tensor(x)
        labels[i, :len(y)] = torch.tensor(y)
        mask[i, :len(x)] = 1
    return ids, mask, labels


def main():
    p = argparse.ArgumentParser()
    for a in ("--model", "--train", "--test"):
        p.add_argument(a, required=True)
    p.add_argument("--max-steps", type=int, default=400)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--warmup-ratio", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--predictions", help="write each test sentence's gold and predicted tags")
    a = p.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    train_sentences = read_conll(a.train)
    test_sentences = read_conll(a.test)
    labels = sorted({t for _, tags in train_sentences for t in tags})  # run_ner's get_label_list
    label2id = {l: i for i, l in enumerate(labels)}
    tokenizer = BertTokenizer.from_pretrained(a.model)
    model, info = BertForTokenClassification.from_pretrained(
        a.model, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id,
        ignore_mismatched_sizes=True, output_loading_info=True)
    started_new = info["missing_keys"] + [k for k, *_ in info["mismatched_keys"]]
    if started_new:
        sys.exit(f"ner_peer: {a.model} lacks the token head to start from: {started_new}")
    train, train_cut = encode(tokenizer, train_sentences, label2id, a.max_seq_len)
    test, test_cut = encode(tokenizer, test_sentences, label2id, a.max_seq_len)
    n, B = len(train), a.batch_size

    decay = [name for name, _ in model.named_parameters()
             if "bias" not in name and "LayerNorm" not in name]
    groups = [
        {"params": [q for name, q in model.named_parameters() if name in decay],
         "weight_decay": a.weight_decay},
        {"params": [q for name, q in model.named_parameters() if name not in decay],
         "weight_decay": 0.0},
    ]
    opt = AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, no_deprecation_warning=True)
    warmup = math.ceil(a.warmup_ratio * a.max_steps)
    sched = get_linear_schedule_with_warmup(opt, warmup, a.max_steps)

    model.train()
    t_train = time.perf_counter()
    losses = []
    for step in range(a.max_steps):
        start = step * B % n  # file order, epoch after epoch
        batch = [train[(start + i) % n] for i in range(B)] if start + B > n else train[start:start + B]
        ids, mask, y = collate(batch, tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if (step + 1) % 50 == 0:
            print(f"peer step {step + 1}/{a.max_steps} loss {sum(losses[-50:]) / 50:.4f}",
                  file=sys.stderr, flush=True)
    train_s = time.perf_counter() - t_train

    model.eval()
    t_eval = time.perf_counter()
    truth, predicted = [], []
    with torch.no_grad():
        for s in range(0, len(test), 64):
            ids, mask, y = collate(test[s:s + 64], tokenizer.pad_token_id)
            pred = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
            for row_p, row_y in zip(pred.tolist(), y.tolist()):
                truth.append([labels[t] for t in row_y if t >= 0])
                predicted.append([labels[q] for q, t in zip(row_p, row_y) if t >= 0])
    eval_s = time.perf_counter() - t_eval
    if a.predictions:
        with open(a.predictions, "w") as f:
            for t, q in zip(truth, predicted):
                f.write(json.dumps({"gold": t, "pred": q}) + "\n")
    print(json.dumps({
        "peer": "transformers", "torch": torch.__version__, "threads": a.threads,
        "steps": a.max_steps, "batch_size": B, "warmup_steps": warmup, "train_sentences": n,
        "train_words_cut": train_cut, "test_sentences": len(test), "test_words_cut": test_cut,
        "train_seconds": train_s, "eval_seconds": eval_s,
        "total_seconds": time.perf_counter() - t_start,
        "final_loss": sum(losses[-50:]) / min(50, len(losses)) if losses else None,
        "eval_precision": precision_score(truth, predicted),
        "eval_recall": recall_score(truth, predicted),
        "eval_f1": f1_score(truth, predicted),
        "eval_accuracy": accuracy_score(truth, predicted),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
