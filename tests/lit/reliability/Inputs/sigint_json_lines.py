"""Sends SIGINT to `MPIRUN -np 2 tessel trg --json -o FILE` mid-sweep and checks that
every line of FILE parses as JSON (none truncated). The sweep (20000 betas, tens of seconds)
is interrupted within a second of its first line, so a trial never ends on its own.
Usage: sigint_json_lines.py MPIRUN TESSEL TRIALS OUTDIR."""
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time

mpirun, tessel, trials, outdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.makedirs(outdir, exist_ok=True)
for trial in range(trials):
    out = os.path.join(outdir, "sweep%d.jsonl" % trial)
    cmd = shlex.split(mpirun) + ["-np", "2", tessel, "trg", "--beta-range", "0.3:0.5:20000", "--chi", "6",
                                 "--steps", "6", "--grad", "--json", "--repeat", "0", "-o", out]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Mid-sweep: once rank 0 has written its first line (both ranks have compiled and
    # prepared by then, however loaded the machine), then a random moment later.
    deadline = time.monotonic() + 240
    while p.poll() is None and time.monotonic() < deadline:
        if os.path.exists(out):
            with open(out) as f:
                if "\n" in f.read():
                    break
        time.sleep(0.05)
    time.sleep(random.random())
    if p.poll() is not None:
        print("trial", trial, "the sweep ended before SIGINT (exit %d)" % p.returncode)
        continue
    p.send_signal(signal.SIGINT)
    p.wait()
    with open(out) as f:
        text = f.read()
    lines = text.split("\n")
    if lines[-1] != "":
        print("trial", trial, "a truncated last line of %d bytes" % len(lines[-1]))
        continue
    for line in lines[:-1]:
        json.loads(line)
    print("trial", trial, "complete lines:", "yes" if len(lines) > 1 else "none")
