#!/usr/bin/env python3
"""Checks every #include between the project's folders against ARCHITECTURE.md.

ARCHITECTURE.md's table names, for each folder, the folders its files may include; its list
of exceptions names single includes that break the table today and are to be removed. This
fails on an include that is neither allowed nor listed (a new dependency the layering does not
allow), and on a listed exception that no longer exists (so the list stays true).

Usage: layering_check.py [SOURCE_ROOT]
"""
import os
import re
import sys

CHECKED = ("common", "cache", "storage", "compiler", "keying", "server", "client", "cli")


def folder_of(path):
    parts = path.split("/")
    if parts[0] in ("compiler", "client") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def read_rules(text):
    allowed, exceptions = {}, set()
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
            continue
        if section == "what each folder may include":
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].startswith("`"):
                name = cells[0].strip("`")
                allowed[name] = set(re.findall(r"`([^`]+)`", cells[1]))
        elif section == "exceptions":
            m = re.match(r"^- `([^`]+)` -> `([^`]+)`", line)
            if m:
                exceptions.add((m.group(1), m.group(2)))
    return allowed, exceptions


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    os.chdir(root)
    with open("ARCHITECTURE.md", encoding="utf-8") as f:
        allowed, exceptions = read_rules(f.read())
    if not allowed:
        print("ARCHITECTURE.md: no table of what each folder may include")
        return 1
    problems, seen = [], set()
    for top in CHECKED:
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                source = folder_of(path)
                if source not in allowed:
                    problems.append(f"{path}: folder {source} is not in ARCHITECTURE.md's table")
                    continue
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m or not os.path.exists(m.group(1)):
                            continue
                        target = folder_of(m.group(1))
                        if target == source or target in allowed[source]:
                            continue
                        if (path, m.group(1)) in exceptions:
                            seen.add((path, m.group(1)))
                            continue
                        problems.append(
                            f"{path}:{number}: includes {m.group(1)}, but {source} may not use "
                            f"{target} (ARCHITECTURE.md)")
    for path, header in sorted(exceptions - seen):
        problems.append(f"ARCHITECTURE.md: the exception {path} -> {header} no longer exists; "
                        "remove it from the list")
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} problems, {len(seen)} listed exceptions in use")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
