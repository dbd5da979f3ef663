#!/usr/bin/env python3
"""The Markdown table of an interleaved peer benchmark (bench/*_vs_*.sh).

  round_ratios.py FILE PART=DESCRIPTION...

FILE holds one line per measurement, "round part engine ms", engine bertfit or peer (ms nan: the
run failed; such rounds give no ratio and the table says which engine failed). Per part (in
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
        failed = [e for e in ms if any(v != v for v in ms[e].values())]
        ms = {e: {k: v for k, v in ms[e].items() if v == v} for e in ms}
        ratios = [ms["peer"][k] / ms["bertfit"][k] for k in ms["bertfit"] if k in ms["peer"]]
        if not ratios:
            med = {e: f"{statistics.median(ms[e].values()):.1f}" if ms[e] else "failed" for e in ms}
            print(f"| {what.get(part, part)} | {med['bertfit']} | {med['peer']} | - ({', '.join(failed)} failed) | |")
            continue
        print(f"| {what.get(part, part)} | {statistics.median(ms['bertfit'].values()):.1f} | "
              f"{statistics.median(ms['peer'].values()):.1f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f} – {max(ratios):.2f} |")


if __name__ == "__main__":
    main()
