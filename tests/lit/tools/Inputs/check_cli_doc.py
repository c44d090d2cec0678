#!/usr/bin/env python3
"""Checks that docs/cli.md describes every flag of every `tessel` subcommand.

    check_cli_doc.py TESSEL DOCS/CLI.MD

Reads the subcommands from `tessel --help`, the long flags of each from `tessel SUB
--help`, and reports each flag (with its subcommand) that docs/cli.md never names as
`--flag`. Exit 1 with the list when any is missing, 0 otherwise (printing how many
flags it checked).
"""
import re
import subprocess
import sys


def help_text(tessel, *args):
    return subprocess.run([tessel, *args, "--help"], capture_output=True, text=True, check=True).stdout


def main():
    tessel, doc_path = sys.argv[1], sys.argv[2]
    doc = open(doc_path, encoding="utf-8").read()
    top = help_text(tessel)
    subs = re.findall(r"^  ([a-z]+)\s{2,}", top.split("Subcommands:", 1)[1], flags=re.M)
    if not subs:
        sys.exit("no subcommands found in `tessel --help`")
    named = set(re.findall(r"--[a-z][a-z0-9-]*", doc))
    missing, checked = [], 0
    for sub in subs:
        # Flags from the option lines (two-space indent, then -x, or --flag), not the prose.
        text = help_text(tessel, sub)
        flags = set()
        for line in text.splitlines():
            m = re.match(r"^\s{2}(?:-\w,)?(--[a-z][a-z0-9-]*)(?:,!?(--[a-z][a-z0-9-]*))?", line)
            if m:
                flags.update(f for f in m.groups() if f)
        flags.discard("--help")
        for f in sorted(flags):
            checked += 1
            if f not in named:
                missing.append(f"tessel {sub} {f}")
    if missing:
        print("docs/cli.md does not describe:", *missing, sep="\n  ")
        sys.exit(1)
    print(f"docs/cli.md describes all {checked} flags of {len(subs)} subcommands")


if __name__ == "__main__":
    main()
