#!/usr/bin/env python3
"""Speedup against nodes as a small standalone SVG (no plotting library needed).

usage: plot_scaling.py scaling.csv scaling.svg   (the CSV that bench/scaling.sh --out writes)
Draws one line per link rate (1 node joins every line; dashed: the speedup against a node's
speed when co-located, when the CSV has it), the seed's PyTorch + oneCCL figures
(1.7x on 2 nodes, 3x on 4) and the ideal line.
"""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
single = [r for r in rows if r["nodes"] == "1"]
series = {}
for r in rows:
    if r["nodes"] != "1":
        series.setdefault((r["harsher"], r["rate"]), []).append((int(r["nodes"]), float(r["speedup"])))
colocated = {}  # speedup against a node's speed when co-located (scaling.sh's Tc), if measured
for r in rows:
    if r["nodes"] != "1" and r.get("speedup_vs_colocated"):
        colocated.setdefault((r["harsher"], r["rate"]), []).append(
            (int(r["nodes"]), float(r["speedup_vs_colocated"])))
lines = []  # (label, points, dashed)
for (f, rate), pts in series.items():
    label = f"bertfit, {rate}" + (" (seed's compute/bandwidth ratio)" if f == "1" else f" ({f}x harsher)")
    lines.append((label, [(1, 1.0)] + sorted(pts), False))
    if (f, rate) in colocated:
        lines.append((label + ", vs co-located node", [(1, 1.0)] + sorted(colocated[(f, rate)]), True))
lines.append(("seed: PyTorch + IPEX + oneCCL, 25 Gbit/s", [(1, 1.0), (2, 1.7), (4, 3.0)], False))
max_n = max([p[0] for _, pts, _ in lines for p in pts] + [4])

W, H, L, R, T, B = 640, 520, 60, 60, 30, 230
def x(n): return L + (n - 1) / (max_n - 1) * (W - L - R)
def y(s): return H - B - (s - 1) / (max_n - 1) * (H - T - B)
colors = ["#1f77b4", "#2ca02c", "#9467bd", "#d62728"]
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">DistilBERT on MRPC: speedup against nodes</text>']
for n in range(1, max_n + 1):
    out.append(f'<line x1="{x(n)}" y1="{y(1)}" x2="{x(n)}" y2="{y(max_n)}" stroke="#ddd"/>')
    out.append(f'<text x="{x(n)}" y="{y(1) + 16}" text-anchor="middle">{n}</text>')
    out.append(f'<line x1="{x(1)}" y1="{y(n)}" x2="{x(max_n)}" y2="{y(n)}" stroke="#ddd"/>')
    out.append(f'<text x="{x(1) - 8}" y="{y(n) + 4}" text-anchor="end">{n}x</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{y(1) + 34}" text-anchor="middle">nodes</text>')
out.append(f'<line x1="{x(1)}" y1="{y(1)}" x2="{x(max_n)}" y2="{y(max_n)}" stroke="#999" stroke-dasharray="4 4"/>')
legend_y = y(1) + 52
out.append(f'<line x1="{L}" y1="{legend_y}" x2="{L + 24}" y2="{legend_y}" stroke="#999" stroke-dasharray="4 4"/>'
           f'<text x="{L + 30}" y="{legend_y + 4}">ideal</text>')
color_of = {}
value_labels = {}  # nodes -> [(y, text, colour)], drawn last so that they can be kept apart
for i, (label, pts, dashed) in enumerate(lines):
    base = label.split(", vs co-located")[0]
    c = "#ff7f0e" if label.startswith("seed") else color_of.setdefault(base, colors[len(color_of) % len(colors)])
    dash = ' stroke-dasharray="7 3"' if dashed else ""
    path = " ".join(f"{x(n):.1f},{y(s):.1f}" for n, s in pts)
    out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
    for n, s in pts:
        out.append(f'<circle cx="{x(n):.1f}" cy="{y(s):.1f}" r="3.5" fill="{c}"/>')
        if n > 1:
            value_labels.setdefault(n, []).append((y(s) + 4, f"{s:.2f}x", c))
    ly = legend_y + 16 * (i + 1)
    out.append(f'<line x1="{L}" y1="{ly}" x2="{L + 24}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>'
               f'<text x="{L + 30}" y="{ly + 4}">{label}</text>')
for n, labels in value_labels.items():
    # At the last node count the labels sit beside their points; further left the lines climb
    # through that space, so there they form a column starting under the lowest point.
    last = None if n == max_n else max(ly for ly, _, _ in labels) + 4
    for ly, text, c in sorted(labels):
        ly = ly if last is None else max(ly, last + 13)
        out.append(f'<text x="{x(n) + 6:.1f}" y="{ly:.1f}" fill="{c}">{text}</text>')
        last = ly
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
