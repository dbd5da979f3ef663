#!/usr/bin/env python3
"""The Markdown table of an interleaved peer benchmark (bench/*_vs_*.sh).

  round_ratios.py FILE PART=DESCRIPTION...

FILE holds one line per measurement, "round part engine ms", engine bertfit or peer. Per part (in
the order first seen): the median of each engine's ms, the median over rounds of each round's own
ratio peer / bertfit (above 1: bertfit is faster) and the smallest and largest round's ratio.
"""
import statistics
import sys


def main():
    rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
    what = dict(arg.split("=", 1) for arg in sys.argv[2:])
    print("| measurement | bertfit ms (median) | peer ms (median) | peer / bertfit (median of rounds) | min – max |")
    print("|---|---|---|---|---|")
    for part in dict.fromkeys(r[1] for r in rows):
        ms = {e: {int(r[0]): float(r[3]) for r in rows if r[1] == part and r[2] == e} for e in ("bertfit", "peer")}
        ratios = [ms["peer"][k] / ms["bertfit"][k] for k in ms["bertfit"] if k in ms["peer"]]
        if not ratios:
            continue
        print(f"| {what.get(part, part)} | {statistics.median(ms['bertfit'].values()):.1f} | "
              f"{statistics.median(ms['peer'].values()):.1f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f} – {max(ratios):.2f} |")


if __name__ == "__main__":
    main()
