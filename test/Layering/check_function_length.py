#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit in the given files.

GPU kernels are compositions of the kernel-building layer's blocks, each short
enough to read at once (docs/Design.md); this keeps it so. A function's length
runs from the first line of its signature to its closing brace; lambdas count
toward the function that holds them. Comments, strings and character literals
are blanked first so braces inside them do not count.

    check_function_length.py LIMIT FILE...   (exit 1 when any is longer)
"""
import re
import sys

SCOPE = re.compile(r"\b(namespace|struct|class|enum|union)\b[^()]*$")


def blank(src):
    """Replaces comments and literals with spaces, keeping line breaks."""
    def keep_lines(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, keep_lines, src, flags=re.S)


def functions(src):
    """Yields (first line, last line, name) of every function body."""
    stack = []  # ("scope" | "func" | "block", first line, name)
    head, head_line, line = "", None, 1
    for ch in blank(src):
        if ch == "\n":
            line += 1
        if ch == "{":
            inside = any(kind == "func" for kind, _, _ in stack)
            text = head.strip()
            if inside:
                stack.append(("block", line, ""))
            elif "(" not in text or SCOPE.search(text) or text.endswith("="):
                stack.append(("scope", line, ""))
            else:
                name = text.split("(")[0].split()[-1] if text.split("(")[0].split() else "?"
                stack.append(("func", head_line or line, name))
            head, head_line = "", None
        elif ch == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "func":
                    yield first, line, name
            head, head_line = "", None
        elif ch == ";":
            head, head_line = "", None
        else:
            if head_line is None and not ch.isspace():
                head_line = line
            head += ch


def main():
    limit = int(sys.argv[1])
    longest = 0
    bad = 0
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        for first, last, name in functions(src):
            n = last - first + 1
            longest = max(longest, n)
            if n > limit:
                print(f"{path}:{first}: {name} is {n} lines (limit {limit})")
                bad += 1
    print(f"longest function: {longest} lines; {bad} over {limit}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
