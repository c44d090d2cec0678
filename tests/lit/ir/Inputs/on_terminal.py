"""Runs a command with its standard output on a pseudo-terminal and copies what it
printed there to our standard output (line endings as written, not the terminal's
CRLF), so a lit test can check what a person sees at a terminal:

    %python on_terminal.py COMMAND ARGS...

Exits with the command's status."""
import os
import pty
import subprocess
import sys
import termios

primary, secondary = pty.openpty()
# No newline translation: the output reads as the command wrote it.
attrs = termios.tcgetattr(secondary)
attrs[1] &= ~termios.ONLCR
termios.tcsetattr(secondary, termios.TCSANOW, attrs)
proc = subprocess.Popen(sys.argv[1:], stdout=secondary)
os.close(secondary)
out = b""
while True:
    try:
        chunk = os.read(primary, 65536)
    except OSError:  # EIO: the command closed the terminal
        break
    if not chunk:
        break
    out += chunk
sys.stdout.buffer.write(out)
sys.exit(proc.wait())
