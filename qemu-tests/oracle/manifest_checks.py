"""What the checks over a manifest of files share: run `check` on each line's tab-separated
fields (it prints its own `ok` line and returns its problems), print every problem as a
`FAIL` line, and give the exit status (1 if any)."""


def run(manifest_path, check):
    problems = []
    with open(manifest_path, encoding="utf-8") as manifest:
        for line in manifest:
            problems += check(*line.rstrip("\n").split("\t"))
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0
