#!/usr/bin/env python3
"""Predicted efficiency against nodes (log2 axis) as a small standalone SVG, one line per model
and link, from the CSV bench/scaling_predict.sh --out writes (no plotting library needed).

usage: plot_scaling_model.py prediction.csv prediction.svg
"""
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
series = {}
for r in rows:
    series.setdefault((r["model"], r["link"]), []).append((int(r["nodes"]), float(r["efficiency"])))
max_n = max(n for pts in series.values() for n, _ in pts)
W, H, L, R, T, B = 680, 560, 60, 30, 30, 200
def x(n): return L + math.log2(n) / math.log2(max_n) * (W - L - R)
def y(e): return H - B - e * (H - T - B)
models = sorted({m for m, _ in series}, key=lambda m: [k[0] for k in series].index(m))
links = sorted({l for _, l in series}, key=lambda l: [k[1] for k in series].index(l))
colors = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd"]
dashes = ["", ' stroke-dasharray="7 3"', ' stroke-dasharray="2 3"']
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">Predicted data-parallel efficiency (bertfit bench scaling)</text>']
n = 1
while n <= max_n:
    out.append(f'<line x1="{x(n):.1f}" y1="{y(0)}" x2="{x(n):.1f}" y2="{y(1)}" stroke="#ddd"/>')
    out.append(f'<text x="{x(n):.1f}" y="{y(0) + 16}" text-anchor="middle">{n}</text>')
    n *= 2
for e in range(0, 11, 2):
    out.append(f'<line x1="{x(1)}" y1="{y(e / 10):.1f}" x2="{x(max_n):.1f}" y2="{y(e / 10):.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{x(1) - 8}" y="{y(e / 10) + 4:.1f}" text-anchor="end">{e * 10}%</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{y(0) + 34}" text-anchor="middle">nodes (batch 32 per node)</text>')
legend_y = y(0) + 56
for i, ((m, l), pts) in enumerate(series.items()):
    c = colors[models.index(m) % len(colors)]
    dash = dashes[links.index(l) % len(dashes)]
    path = " ".join(f"{x(n):.1f},{y(e):.1f}" for n, e in sorted(pts))
    out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
    col, row = i % 3, i // 3
    lx, ly = L + col * 210, legend_y + 16 * row
    out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>'
               f'<text x="{lx + 30}" y="{ly + 4}">{m}, {l}</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
