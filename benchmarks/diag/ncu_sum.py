"""Sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel: total us, launches and
share, largest first (the probe's calls together; divide by --calls for one call).

  python3 benchmarks/diag/ncu_sum.py ncu.csv [--top 12]
"""
import argparse
import collections
import csv
import io
import re


def kernel_name(full):
    """The kernel's own name: no parameters, template arguments or namespaces."""
    name = full.split("(")[0]
    while True:
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    return name.split("::")[-1].replace("void ", "")[-60:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    text = open(args.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{args.csv}: no ncu table")
        return
    total = collections.Counter()
    launches = collections.Counter()
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                 "msecond": 1e3}.get(row["Metric Unit"], 1.0)
        name = kernel_name(row["Kernel Name"])
        total[name] += value * scale
        launches[name] += 1
    overall = sum(total.values())
    print(f"{args.csv}: {overall:.0f} us over {sum(launches.values())} launches")
    for name, us in total.most_common(args.top):
        print(f"  {us:10.0f} us {launches[name]:5d} x {100 * us / overall:5.1f}%  {name}")


if __name__ == "__main__":
    main()
