#!/usr/bin/env bash
# Fails when a file of the repository refers to the working folder beside it (the parent
# directory's "shared" folder): a clone must build, test, benchmark and read its docs on its
# own. Scans the tracked files (git ls-files), or every file under ROOT except build
# directories and .git when ROOT is not a git checkout. Prints file:line of each hit.
#   tests/no_outside_refs.sh [ROOT]      (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
pat='\.\./'"shared"   # built in two pieces so that this file does not match itself

list_files() {
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked files plus new files not yet added (but not ignored ones such as build/).
    git -C "$root" ls-files -z --cached --others --exclude-standard
  else
    # The directories .gitignore lists (build trees, caches, virtualenvs, benchmark output).
    (cd "$root" && find . -type d \( -name .git -o -name 'build*' -o -name .cache \
        -o -name __pycache__ -o -name .venv -o -name out \) -prune -o -type f -print0 |
        sed -z 's|^\./||')
  fi
}

hits=$(cd "$root" && list_files | while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  grep -I -n -H -E -e "$pat" -- "$f" || true
done)
if [ -n "$hits" ]; then
  echo "no_outside_refs: these files refer to a folder outside the repository:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "no_outside_refs: no file under $root refers outside the repository"
