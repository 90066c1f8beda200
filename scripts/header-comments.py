#!/usr/bin/env python3
"""Every declaration in a C header has a comment on the line before it: each constant
(#define), type (typedef), struct field and function. Usage: header-comments.py HEADER.
Prints each declaration without one and exits 1 if there is any."""

import re
import sys


def undocumented(lines):
    """(line number, text) of each declaration whose previous line is not a comment."""
    found = []
    in_struct = False
    for i, line in enumerate(lines):
        text = line.strip()
        previous = lines[i - 1].strip() if i > 0 else ""
        commented = previous.startswith("//") or previous.endswith("*/")
        if in_struct:
            if text.startswith("}"):
                in_struct = False
            elif text.endswith(";") and not text.startswith("//") and not commented:
                found.append((i + 1, text))
            continue
        # (The header guard and the defaults inside #if blocks are not the API's.)
        is_constant = text.startswith("#define TACHYON_") and not previous.startswith("#if")
        is_type = text.startswith("typedef ")
        is_function = re.match(r"^[A-Za-z].*\btachyon_\w+\(", line) is not None and not is_type
        if text.startswith("#define TACHYON_H"):
            continue
        if (is_constant or is_type or is_function) and not commented:
            found.append((i + 1, text))
        if is_type and text.endswith("{"):
            in_struct = True
    return found


def main():
    path = sys.argv[1]
    lines = open(path, encoding="utf-8").read().split("\n")
    missing = undocumented(lines)
    for number, text in missing:
        print(f"{path}:{number}: no comment before: {text}")
    declared = sum(1 for line in lines if line.startswith(("#define TACHYON_", "typedef ")))
    if declared < 40:
        print(f"{path}: only {declared} declarations found: not the header expected")
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
