"""Compares numbers of `tessel trg --json` with outputs printed by `tessel run`.

usage: same_doubles.py TRG_JSON RUN_OUTPUT KEY=OUTPUT ...

Each KEY of the first JSON row of TRG_JSON must equal the output OUTPUT (a scalar printed
with 17 significant digits) of RUN_OUTPUT bitwise. Prints one line per pair.
"""
import json
import re
import sys

row = json.loads(open(sys.argv[1]).readline())
printed = {}
for line in open(sys.argv[2]):
    m = re.match(r"output (\S+): f64\[\] = \[(\S+)\]", line)
    if m:
        printed[m.group(1)] = float(m.group(2))
ok = True
for pair in sys.argv[3:]:
    key, out = pair.split("=")
    same = row[key] == printed[out]
    ok &= same
    print(("same" if same else "DIFFERENT"), key, repr(row[key]), out, repr(printed[out]))
sys.exit(0 if ok else 1)
