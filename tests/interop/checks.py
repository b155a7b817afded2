"""The interop scripts' output: one line per check passed, FAILED and an exit on the first not."""
import sys


def check(name, condition, detail=""):
    if not condition:
        print(f"FAILED {name}: {detail}")
        sys.exit(1)
    print(name, flush=True)
