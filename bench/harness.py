#!/usr/bin/env python3
"""The statistics every benchmark of bench/ shares: medians, paired per-round ratios and JSON lines of results.

A benchmark here times two arms A and B (spread and a peer, a new build and a base one) in alternating rounds, so a
shared machine's drift lands on both; the figure it reports is the median of the per-round ratios A / B, with their
range, not the ratio of two medians taken minutes apart. This file computes that once, for the shell scripts of
bench/ (its command line) and for Python (import it: `sys.path.insert(0, "bench"); import harness`). Standard
library only, so Debian's python3 runs it without the reference environment.

    harness.py paired --bench NAME [--case CASE] --a-label spread --b-label peer --a "V1 V2 ..." --b "W1 W2 ..."
                      [--digits 3] [--unit tokens/s] [--lower-is-better] [--no-table] [--results FILE]
                      [--set KEY=VALUE ...]
        the rounds as a table (round, A, B, A / B), then one line: median of the per-round ratios A / B (min-max)
        and the median of each arm; appends the result as one JSON line to the results file. With
        --lower-is-better (times), the ratio is B / A, so > 1 still means A is faster.
    harness.py median [--digits N] X ...        the median of the numbers
    harness.py ratio [--digits N] A B           A / B
    harness.py field [--file] JSON KEY          KEY of the last JSON line of JSON (--file: of the file JSON)
    harness.py record [--results FILE] OBJ ...  the JSON objects merged (later keys win), appended as one line

The results file: --results, else $BENCH_RESULTS, else build/bench_results.jsonl of the repository (git-ignored).
Each line holds the bench's name, the UTC time, the commit, the load average, the CPU model and its count of
logical CPUs, and what --set added.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median(values):
    return statistics.median(float(v) for v in values)


def paired(a, b, lower_is_better=False):
    """The per-round ratios A / B (B / A for times) of two equally long lists of one figure per round, their
    median and range, and each arm's median."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired rounds need one value of each arm per round (A has {len(a)}, B has {len(b)})")
    ratios = [(y / x) if lower_is_better else (x / y) for x, y in zip(a, b)]
    return {"rounds": len(a), "a_median": median(a), "b_median": median(b), "ratios": ratios,
            "median_ratio": median(ratios), "min_ratio": min(ratios), "max_ratio": max(ratios)}


def context():
    """What every result line carries besides its figures: when, which commit, how busy the machine was."""
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "unknown"
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "load": load,
            "cpu": cpu_model(), "cpus": os.cpu_count()}


def cpu_model():
    """The CPU's name as /proc/cpuinfo gives it: a figure means little without the machine (AMX or not)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def results_path(given):
    return given or os.environ.get("BENCH_RESULTS") or os.path.join(REPO, "build", "bench_results.jsonl")


def append_result(path, record):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def value_of(text):
    """A --set value: JSON where it parses (numbers stay numbers), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def numbers(args):
    """Numbers given as separate arguments or as one space-separated argument (a shell array's "${a[*]}")."""
    return [float(x) for arg in args for x in arg.split()]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("paired")
    p.add_argument("--bench", required=True)
    p.add_argument("--case", help="which of the bench's cases (a shape, a tokenizer), printed and recorded")
    p.add_argument("--a-label", default="A")
    p.add_argument("--b-label", default="B")
    p.add_argument("--a", nargs="+", required=True)
    p.add_argument("--b", nargs="+", required=True)
    p.add_argument("--unit", default="")
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--lower-is-better", action="store_true")
    p.add_argument("--no-table", action="store_true")
    p.add_argument("--results")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    m = sub.add_parser("median")
    m.add_argument("--digits", type=int)
    m.add_argument("values", nargs="+")
    r = sub.add_parser("ratio")
    r.add_argument("--digits", type=int)
    r.add_argument("a", type=float)
    r.add_argument("b", type=float)
    f = sub.add_parser("field")
    f.add_argument("--file", action="store_true")
    f.add_argument("json")
    f.add_argument("key")
    rec = sub.add_parser("record")
    rec.add_argument("--results")
    rec.add_argument("objects", nargs="+")
    args = parser.parse_args(argv)

    show = lambda x, digits: f"{x:.{digits}f}" if digits is not None else f"{x:g}"
    if args.command == "median":
        print(show(median(numbers(args.values)), args.digits))
    elif args.command == "ratio":
        print(show(args.a / args.b, args.digits))
    elif args.command == "field":
        if args.file:
            with open(args.json) as file:
                text = file.read()
        else:
            text = args.json
        lines = [l for l in text.splitlines() if l.strip()]
        value = (json.loads(text) if args.file else json.loads(lines[-1]))[args.key]
        print(json.dumps(value) if isinstance(value, (dict, list)) else value)
    elif args.command == "record":
        record = {}
        for obj in args.objects:
            record.update(json.loads(obj))
        append_result(results_path(args.results), record)
    else:
        a, b = numbers(args.a), numbers(args.b)
        result = paired(a, b, args.lower_is_better)
        d = args.digits
        over = f"{args.b_label} / {args.a_label}" if args.lower_is_better else f"{args.a_label} / {args.b_label}"
        unit = f" {args.unit}" if args.unit else ""
        if not args.no_table:
            width = max(10, len(args.a_label), len(args.b_label))
            print(f"{'round':<6} {args.a_label:>{width}} {args.b_label:>{width}} {over:>{max(10, len(over))}}")
            for i, (x, y, q) in enumerate(zip(a, b, result["ratios"]), 1):
                print(f"{i:<6} {x:>{width}g} {y:>{width}g} {q:>{max(10, len(over))}.{d}f}")
        name = f"{args.bench} ({args.case})" if args.case else args.bench
        print(f"{name}: {over} median {result['median_ratio']:.{d}f}x over {result['rounds']} paired round(s) "
              f"(range {result['min_ratio']:.{d}f}-{result['max_ratio']:.{d}f}); medians {args.a_label} "
              f"{result['a_median']:g}{unit}, {args.b_label} {result['b_median']:g}{unit}")
        record = {"bench": args.bench, **({"case": args.case} if args.case else {}), "a": args.a_label, "b": args.b_label, "ratio": over, "unit": args.unit,
                  "a_values": a, "b_values": b, **result, **context()}
        for kv in args.set:
            key, _, value = kv.partition("=")
            record[key] = value_of(value)
        append_result(results_path(args.results), record)
        print(f"(appended to {results_path(args.results)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
