#!/usr/bin/env python3
"""Every commit BENCHMARKS.md cites is reachable from HEAD (run by
scripts/test.sh): a figure stamped with a commit that a rebase dropped, or
that lives on a branch never merged, names code nobody can rebuild.

A cited commit is any word of 7 to 40 hexadecimal digits with at least one
letter and one digit in it; each must name a commit that
`git merge-base --is-ancestor COMMIT HEAD` accepts. Prints one line per
commit that does not, and exits 1 if there is any (or if there is none at
all: results without a stamp are the thing this check exists to prevent).
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"(?<![0-9A-Za-z_/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")


def cited_commits(text: str) -> list[str]:
    return sorted(set(CITED.findall(text)))


def reachable(commit: str) -> bool:
    r = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=ROOT,
                       capture_output=True, text=True)
    return r.returncode == 0


def main() -> int:
    text = (ROOT / "BENCHMARKS.md").read_text()
    commits = cited_commits(text)
    if not commits:
        print("BENCHMARKS.md cites no commit")
        return 1
    missing = [c for c in commits if not reachable(c)]
    for c in missing:
        print(f"BENCHMARKS.md cites {c}, which is not a commit reachable from HEAD")
    print(f"{len(commits) - len(missing)} of {len(commits)} cited commits reachable from HEAD")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
