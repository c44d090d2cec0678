"""Writes a crash reproducer to a file whose name has a quote, a space and a newline,
then runs the `// reproduce:` line of that file with bash: it must reach the same error.
Usage: repro_quoting.py TESSEL PROGRAM DIR."""
import os
import subprocess
import sys

tessel, prog, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(outdir, exist_ok=True)
path = os.path.join(outdir, "re'p ro\nduce.tir")
r = subprocess.run([tessel, "opt", prog, "--passes=dce,grad{wrt=x},cse", "--crash-reproducer=" + path],
                   capture_output=True, text=True)
print("exit", r.returncode)
with open(path) as f:
    lines = f.read().split("\n")
print("comment lines:", all(l.startswith("//") for l in lines[:4]))
command = [l for l in lines if l.startswith("// reproduce: tessel ")][0][len("// reproduce: tessel "):]
again = subprocess.run(["bash", "-c", "exec \"$0\" " + command, tessel], capture_output=True, text=True)
print("again", again.returncode, again.stderr.splitlines()[0])
