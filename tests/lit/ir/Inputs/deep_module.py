"""Prints a module whose entry calls a chain of N functions (N from argv): @f0 returns its
input, @f<i> calls @f<i-1>."""
import sys

n = int(sys.argv[1])
out = ["program @f0(%u: f64[]) {\n  return %u\n}\n"]
for i in range(1, n):
    out.append(f"program @f{i}(%u: f64[]) {{\n  %0 = call @f{i - 1}(%u) : f64[]\n  return %0\n}}\n")
out.append(f"entry program @main(%a: f64[]) {{\n  %b = call @f{n - 1}(%a) : f64[]\n  return %b\n}}\n")
sys.stdout.write("\n".join(out))
