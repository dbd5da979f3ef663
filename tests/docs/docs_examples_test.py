#!/usr/bin/env python3
"""The docs cannot drift from the binary: runs every runnable shell example of README.md and
docs/*.md, and checks every --flag the docs name against the binary's flag tables.

Marker convention (also stated in README.md, "Everything else"):
  <!-- example -->            on the line before a ```sh fence: the block is run.
  <!-- example: no-run WHY --> on the line before a ```sh fence: the block is not run (it needs
                               mpirun, a cluster, the network or root), but its flags are checked.
Runnable blocks of one file run in order, in one fresh folder `work/` beside a link `shared` to
the tiny golden models and data (so `../shared/...` resolves as from the repository root), each
block as `bash -euo pipefail`, with the freshly built bertfit first in PATH, no network
(HF_HUB_OFFLINE=1), an empty HOME and mpirun allowed as root (OMPI_ALLOW_RUN_AS_ROOT). In
runnable blocks the port 8080 is replaced by a free one.
Every process a block starts is killed when the block ends.

Flags: in every ```sh block (marked or not) each `bertfit CMD ... --flag` must be a flag of
`bertfit CMD --help`; elsewhere (prose, and DESIGN.md/PERFORMANCE.md) a `--flag` in backticks
must be a flag of the command named before it in the same backticks (`train --resume`), else of
some command, else listed in EXTERNAL_FLAGS (flags of other tools the docs show).

Usage: docs_examples_test.py --bertfit BIN --source REPO --shared SHARED [--only FILE.md]
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Flags of other programs that the docs show (mpirun, srun, curl, scripts, cmake, ...).
EXTERNAL_FLAGS = {
    "--mpi", "--ntasks-per-node", "--hostfile", "--map-by", "--bind-to", "--mca", "--oversubscribe",
    "--allow-run-as-root", "--out", "--nodes", "--preset", "--build", "--target", "--data-raw",
    "--kill-on-bad-exit", "--latency", "--train-seed",
}

BLOCK_TIMEOUT_S = 240
RUN_MARK = re.compile(r"^\s*<!--\s*example\s*-->\s*$")
NORUN_MARK = re.compile(r"^\s*<!--\s*example:\s*no-run\b.*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def help_flags(bertfit, args):
    r = subprocess.run([bertfit] + args + ["--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"bertfit {' '.join(args)} --help failed: {r.stderr}")
    flags, commands, section = set(), [], None
    for line in r.stdout.splitlines():
        if line and not line.startswith(" "):
            section = line.split(":")[0].strip().lower()
            continue
        stripped = line.strip()
        if not stripped:
            continue
        first = stripped.split()[0]
        if section == "subcommands" and line.startswith("  ") and not line.startswith("   "):
            commands.append(first)
        elif stripped.startswith("-"):
            for name in first.split(","):
                name = re.split(r"[ {=]", name)[0]
                if name.startswith("--"):
                    flags.add(name)
    return flags, commands


def flag_tables(bertfit):
    top, commands = help_flags(bertfit, [])
    tables = {"": top}
    for cmd in commands:
        tables[cmd], _ = help_flags(bertfit, [cmd])
    return tables


def blocks(text):
    """(language, first line number, body, mark) of each fenced block; mark: run, no-run or None."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        mark = None
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and RUN_MARK.match(lines[j]):
            mark = "run"
        elif j >= 0 and NORUN_MARK.match(lines[j]):
            mark = "no-run"
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append((lang, start + 1, "\n".join(body), mark))
        i += 1
    return out


def check_shell_flags(body, tables, where, errors):
    """Each `bertfit CMD ...` command of a shell block: its --flags must be CMD's."""
    text = re.sub(r"\\\n", " ", body)
    for lineno, line in enumerate(text.split("\n")):
        line = re.sub(r"(^|\s)#.*$", "", line)  # comments
        for part in re.split(r"\||&&|;|(?<!\d)&(?!\d)", line):
            words = part.split()
            for k, w in enumerate(words):
                if os.path.basename(w) == "bertfit" or w == "$b":
                    rest = words[k + 1:]
                    cmd = rest[0] if rest and not rest[0].startswith("-") else ""
                    if cmd not in tables:
                        errors.append(f"{where}: `bertfit {cmd}`: no such command")
                        break
                    for f in FLAG.findall(" ".join(rest)):
                        if f not in tables[cmd]:
                            errors.append(f"{where}: `bertfit {cmd}` has no flag {f}")
                    break


def check_prose_flags(text, tables, where, errors):
    every = set().union(*tables.values())
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for span in re.findall(r"`([^`]*)`", line):
            cmd = None
            for w in span.split():
                if w in tables and w and not w.startswith("-"):
                    cmd = w
                for f in FLAG.findall(w):
                    if cmd is not None and f in tables[cmd]:
                        continue
                    if cmd is not None and f not in EXTERNAL_FLAGS:
                        errors.append(f"{where}:{n}: `{span}`: {cmd} has no flag {f}")
                    elif cmd is None and f not in every and f not in EXTERNAL_FLAGS:
                        errors.append(f"{where}:{n}: `{span}`: no command has the flag {f}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_block(body, cwd, env, where):
    script = "set -euo pipefail\n" + body.replace("8080", str(free_port())) + "\n"
    start = time.monotonic()
    p = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BLOCK_TIMEOUT_S)
        failed = p.returncode != 0 and f"exit code {p.returncode}"
    except subprocess.TimeoutExpired:
        out, failed = "", f"over {BLOCK_TIMEOUT_S} s"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever the block left running (a server)
        except ProcessLookupError:
            pass
    p.wait()
    print(f"  {where}: {'FAILED (' + failed + ')' if failed else 'ok'} "
          f"({time.monotonic() - start:.1f} s)", flush=True)
    # The output's last lines show what ran (all of it on failure).
    tail = (out or "").splitlines()[-40 if failed else -2:]
    print("\n".join("    | " + l[:200] for l in tail), flush=True)
    return not failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertfit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--only", help="run only this file's examples (a path under --source)")
    a = ap.parse_args()
    bertfit = os.path.abspath(a.bertfit)
    files = ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(a.source, "docs"))
        if f.endswith(".md"))
    tables = flag_tables(bertfit)
    errors, failures, ran = [], [], 0
    for rel in files:
        text = open(os.path.join(a.source, rel), encoding="utf-8").read()
        check_prose_flags(text, tables, rel, errors)
        found = blocks(text)
        for lang, line, body, mark in found:
            if lang in ("sh", "bash", "console") or mark:
                check_shell_flags(body, tables, f"{rel}:{line}", errors)
            if mark and lang != "sh":
                errors.append(f"{rel}:{line}: a marked example must be a ```sh block")
        runnable = [(line, body) for lang, line, body, mark in found if mark == "run"]
        if not runnable or (a.only and a.only != rel):
            continue
        print(f"{rel}: {len(runnable)} examples", flush=True)
        tmp = tempfile.mkdtemp(prefix="bertfit-docs-")
        try:
            os.symlink(os.path.abspath(a.shared), os.path.join(tmp, "shared"))
            work = os.path.join(tmp, "work")
            home = os.path.join(tmp, "home")
            os.makedirs(work)
            os.makedirs(home)
            env = dict(os.environ)
            env.update({"PATH": os.path.dirname(bertfit) + os.pathsep + env.get("PATH", ""),
                        "HOME": home, "HF_HUB_OFFLINE": "1", "HF_HOME": os.path.join(home, "hf"),
                        # mpirun examples run as root in CI containers
                        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
            for line, body in runnable:
                ran += 1
                if not run_block(body, work, env, f"{rel}:{line}"):
                    failures.append(f"{rel}:{line}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for e in errors:
        print("FLAG: " + e)
    for f in failures:
        print("FAILED EXAMPLE: " + f)
    print(f"{ran} examples run, {len(failures)} failed; {len(errors)} flag errors")
    if ran == 0 and not a.only:
        print("no runnable example found: the marker is <!-- example --> before a ```sh fence")
        return 1
    return 1 if errors or failures else 0


if __name__ == "__main__":
    sys.exit(main())
