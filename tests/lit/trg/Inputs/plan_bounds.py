#!/usr/bin/env python3
"""Checks the planned peaks of `tessel trg --json` against ceilings, not pins.

    tessel trg ... --json | plan_bounds.py GROUP=CEILING[:OPS] ... [--module-over-step R]

Reads the first JSON line's compile_groups. For each GROUP=CEILING the group's
peak_live_bytes must be at most CEILING (a value that grows past it is a regression of
prepare; one that shrinks is fine), and with :OPS its op count must be exactly OPS (the
op count of a traced program is a property of its construction, not a budget).
--module-over-step R: the staged module's peak is at most R times the largest step
program's (its largest segment is a step's backward half, so it stays O(D^4)).
Prints one line per group (group, peak, ceiling) and exits 1 naming what failed.
"""
import json
import sys


def main():
    r = json.loads(sys.stdin.readline())
    groups = {g["group"]: g for g in r["compile_groups"]}
    failed = []
    args = sys.argv[1:]
    ratio = None
    if "--module-over-step" in args:
        i = args.index("--module-over-step")
        ratio = float(args[i + 1])
        del args[i:i + 2]
    for spec in args:
        name, _, bound = spec.rpartition("=")
        ceiling, _, ops = bound.partition(":")
        g = groups.get(name)
        if g is None:
            failed.append(f"no group '{name}' (groups: {', '.join(groups)})")
            continue
        peak = g["peak_live_bytes"]
        print(f"{name}: peak {peak} <= {ceiling}" + (f", ops {g['ops']} == {ops}" if ops else ""))
        if peak > int(ceiling):
            failed.append(f"{name}: peak {peak} above its ceiling {ceiling}")
        if ops and g["ops"] != int(ops):
            failed.append(f"{name}: {g['ops']} ops, expected {ops}")
    if ratio is not None:
        steps = [g["peak_live_bytes"] for n, g in groups.items() if n.startswith("step ")]
        module = groups["staged module"]["peak_live_bytes"]
        print(f"staged module / largest step: {module / max(steps):.3f} <= {ratio}")
        if module > ratio * max(steps):
            failed.append(f"staged module peak {module} above {ratio} x the largest step's {max(steps)}")
    if failed:
        print("FAILED:", *failed, sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    main()
