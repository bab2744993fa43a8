#!/usr/bin/env python3
"""The verdict on a ctest run that must not lie: every named test ran and passed. ctest counts
a test that exits with its SKIP_RETURN_CODE (77: "no GPU") as passed in its exit status, so
tests/gpu/run.sh judges from the JUnit file (`ctest --output-junit`), where a skip is
status="notrun" with a <skipped> element, or, from a ctest older than 3.21, from its log
("***Skipped", "Not Run", "***Failed").

  ctest_verdict.py JUNIT_OR_LOG TEST...   one line per test ("gpu_test_cuda_slots: passed
                                          (12.3 s)"), then a total; exit 0 only when every
                                          TEST passed, 1 otherwise (skipped, failed, not run,
                                          or absent from the run)
"""
import os
import re
import sys
import xml.etree.ElementTree as ET


def from_junit(path):
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name")
        if tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            msg = tc.find("skipped")
            why = (msg.get("message") if msg is not None else None) or tc.get("status")
            out[name] = ("skipped", why, tc.get("time"))
        elif tc.find("failure") is not None or tc.find("error") is not None or tc.get("status") == "fail":
            out[name] = ("failed", None, tc.get("time"))
        else:
            out[name] = ("passed", None, tc.get("time"))
    return out


def from_log(path):
    out = {}
    line_re = re.compile(r"Test\s+#\d+:\s+(\S+)\s+\.*\s*(\*+)?\s*(Passed|Skipped|Failed|Not Run|Timeout|Exception)?"
                         r".*?([\d.]+)\s+sec")
    for line in open(path, errors="replace"):
        m = line_re.search(line)
        if not m:
            continue
        word = (m.group(3) or "Failed").lower()
        status = {"passed": "passed", "skipped": "skipped", "not run": "skipped"}.get(word, "failed")
        out[m.group(1)] = (status, None, m.group(4))
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    path, wanted = argv[1], argv[2:]
    res = {}
    if os.path.isfile(path):
        res = from_junit(path) if path.endswith(".xml") else from_log(path)
    counts = {"passed": 0, "failed": 0, "skipped": 0, "absent": 0}
    for t in wanted:
        status, why, secs = res.get(t, ("absent", "not in this ctest run", None))
        counts[status] += 1
        detail = f" ({secs} s)" if secs else ""
        if why:
            detail += f": {why}"
        print(f"  {t}: {status}{detail}")
    print(f"  {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
          f"{counts['absent']} absent")
    return 0 if counts["passed"] == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
