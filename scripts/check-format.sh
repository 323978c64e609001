#!/usr/bin/env sh
# Checks that every C/C++ source mla tracks is formatted by .clang-format
# (LLVM style). Usage: check-format.sh [FILE...]; with no files, every tracked
# .h/.c/.cpp outside third_party/. Exits 1 naming each file that differs.
set -u
CF="${CLANG_FORMAT:-clang-format-22}"
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$#" -eq 0 ]; then
  set -- $(git -C "$root" ls-files '*.h' '*.c' '*.cpp' | grep -v '^third_party/' | sed "s|^|$root/|")
fi
bad=0
for f in "$@"; do
  if ! "$CF" --style=file:"$root/.clang-format" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "error: $f is not clang-format clean (run: $CF -i $f)"
    bad=$((bad + 1))
  fi
done
echo "checked $# files; $bad not formatted"
[ "$bad" -eq 0 ]
