#!/usr/bin/env python3
"""Linux-only calls live only in files that say so in their first line (issue 21).

A port to another Unix needs to know which files to replace or extend. So every C or
C++ source and header that uses a facility only Linux has must begin with

    /* Linux-only: epoll, eventfd. <anything> */

naming each facility it uses (in any order), and a file that says so must use every
facility it names: the mark is neither missing nor stale. Comments and string
literals are ignored when looking for uses. Run with --self-test to see each rule fail.
"""

import argparse
import re
import sys
from pathlib import Path

# Facility -> what a use looks like in code (comments and strings stripped).
FACILITIES = {
    "epoll": r"\bepoll_(?:create1?|ctl|wait|pwait2?)\s*\(|<sys/epoll\.h>",
    "eventfd": r"\beventfd(?:_read|_write)?\s*\(|<sys/eventfd\.h>",
    "signalfd": r"\bsignalfd\s*\(|<sys/signalfd\.h>",
    "futex": r"\bSYS_futex\b|\bFUTEX_\w+|<linux/futex\.h>",
    "timerfd": r"\btimerfd_\w+\s*\(|<sys/timerfd\.h>",
    "io_uring": r"\bio_uring_\w+\s*\(|<liburing\.h>",
    "SO_REUSEPORT": r"\bSO_REUSEPORT\b",
    "prctl": r"\bprctl\s*\(|<sys/prctl\.h>",
    "OFD locks": r"\bF_OFD_\w+",
    "sched_getaffinity": r"\bsched_[gs]etaffinity\s*\(",
    "cgroups": r"/sys/fs/cgroup|\bcgroup\.procs\b",
    "close_range": r"\bclose_range\s*\(|\bCLOSE_RANGE_\w+",
}

FIRST_LINE = re.compile(r"^/\* Linux-only: ([^.]*)\.")
DIRS = ["src", "apps", "tools", "include", "bench", "tests/unit", "fuzz", "peers/beam_bcrypt"]
EXTS = {".c", ".h", ".cpp", ".cc", ".hpp"}


def strip(code: str) -> str:
    """Remove comments and the contents of string and character literals, keeping
    #include <...> lines (they name headers)."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def uses(code: str) -> set[str]:
    body = strip(code)
    return {name for name, pat in FACILITIES.items() if re.search(pat, body)}


def declared(code: str) -> set[str] | None:
    first = code.split("\n", 1)[0]
    m = FIRST_LINE.match(first)
    if not m:
        return None
    return {part.strip() for part in m.group(1).split(",") if part.strip()}


def check_text(path: str, code: str) -> list[str]:
    used, said = uses(code), declared(code)
    problems = []
    if said is None:
        if used:
            problems.append(f"{path}: uses {', '.join(sorted(used))} but its first line does "
                            f"not say '/* Linux-only: {', '.join(sorted(used))}. ...'")
        return problems
    unknown = said - FACILITIES.keys()
    if unknown:
        problems.append(f"{path}: first line names unknown facilities {sorted(unknown)} "
                        f"(known: {', '.join(FACILITIES)})")
    if used - said:
        problems.append(f"{path}: uses {', '.join(sorted(used - said))} without naming it in "
                        f"its first line")
    if (said & FACILITIES.keys()) - used:
        problems.append(f"{path}: first line names {', '.join(sorted(said - used))}, which "
                        f"it does not use")
    return problems


def check_tree(root: Path) -> list[str]:
    problems = []
    for d in DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.suffix in EXTS and p.is_file() and "/build" not in str(p.relative_to(root)):
                problems += check_text(str(p.relative_to(root)), p.read_text(errors="replace"))
    return problems


def self_test() -> int:
    cases = [
        ("plain.c", "/* nothing */\nint main(void) { return 0; }\n", 0),
        ("missing.c", "/* loop */\n#include <sys/epoll.h>\nint f(void) { return epoll_create1(0); }\n", 1),
        ("marked.c", "/* Linux-only: epoll. A loop. */\nint f(void) { return epoll_create1(0); }\n", 0),
        ("partial.c", "/* Linux-only: epoll. */\nint f(void) { return epoll_create1(0) + eventfd(0, 0); }\n", 1),
        ("stale.c", "/* Linux-only: epoll, futex. */\nint f(void) { return epoll_create1(0); }\n", 1),
        ("comment.c", "/* We do not use eventfd() here. */\nint x;\n", 0),
        ("string.c", "/* s */\nconst char *s = \"epoll_wait(\";\n", 0),
        ("unknown.c", "/* Linux-only: kqueue. */\nint x;\n", 1),
    ]
    bad = 0
    for name, code, want in cases:
        got = len(check_text(name, code)) > 0
        if got != bool(want):
            print(f"self-test: {name}: expected {'a problem' if want else 'none'}, got "
                  f"{check_text(name, code)}")
            bad += 1
    print(f"self-test: {len(cases) - bad}/{len(cases)} cases behave")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--list", action="store_true", help="print each marked file and its facilities")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    problems = check_tree(args.root)
    if args.list:
        for d in DIRS:
            for p in sorted((args.root / d).rglob("*")):
                if p.suffix in EXTS and p.is_file():
                    said = declared(p.read_text(errors="replace"))
                    if said:
                        print(f"{p.relative_to(args.root)}: {', '.join(sorted(said))}")
    for line in problems:
        print(line)
    print(f"check_linux_only: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
