"""Compares numbers of `tessel trg --json` with outputs printed by `tessel run`.

usage: same_doubles.py TRG_JSON RUN_OUTPUT KEY=OUTPUT ... [KEY~OUTPUT ...]

Each KEY of the first JSON row of TRG_JSON must equal the output OUTPUT (a scalar printed
with 17 significant digits) of RUN_OUTPUT bitwise (KEY=OUTPUT), or to 2 units in the last
place (KEY~OUTPUT: the same terms summed in another order). Prints one line per pair.
"""
import math
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
    near = "~" in pair
    key, out = pair.split("~" if near else "=")
    a, b = row[key], printed[out]
    same = a == b or (near and abs(a - b) <= 2 * math.ulp(max(abs(a), abs(b))))
    ok &= same
    print(("same" if same else "DIFFERENT"), key, repr(row[key]), out, repr(printed[out]))
sys.exit(0 if ok else 1)
