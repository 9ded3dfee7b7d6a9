"""Per-module passed/failed/skipped counts from a pytest JUnit XML file."""

import argparse
import collections
import xml.etree.ElementTree as ET


def counts(path):
    per = collections.defaultdict(lambda: collections.Counter())
    for case in ET.parse(path).iter("testcase"):
        # classname: irctest.server_tests.MODULE.Class
        parts = case.get("classname", "").split(".")
        module = parts[2] if len(parts) > 3 and parts[1] == "server_tests" else ".".join(parts[:-1])
        tags = {child.tag for child in case}
        if "failure" in tags or "error" in tags:
            per[module]["failed"] += 1
        elif "skipped" in tags:
            per[module]["skipped"] += 1
        else:
            per[module]["passed"] += 1
    return per


def table(per):
    lines = ["| module | passed | failed | skipped |", "|---|---|---|---|"]
    total = collections.Counter()
    for module in sorted(per):
        c = per[module]
        total.update(c)
        lines.append(f"| {module} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    lines.append(f"| **total** | {total['passed']} | {total['failed']} | {total['skipped']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("junit")
    ap.add_argument("--out")
    args = ap.parse_args()
    text = table(counts(args.junit))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
