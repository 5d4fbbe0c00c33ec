"""Fuzz tfadvisor at scale: N structure-aware and byte-level mutations of the sample traces.

    python benchmarks/fuzz.py --n 10000 --seed 1 --jobs 2 --out /tmp/fuzz_out
    python benchmarks/fuzz.py --seed 1 --only 4711 --out /tmp/fuzz_one     # rerun one input

Each input runs through the real CLI (``tfadvisor analyze LOGDIR --format json``) in a worker process
with a per-input timeout and an address-space limit (``tests/fuzzrun.py`` says what counts as a
failure). Every failing input is saved under ``--out/<class>/input_<index>/`` (the logdir and a README
with what happened and the command); the counts per outcome and per failure class are printed.
Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzzrun  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="number of inputs (default 10000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first input index")
    ap.add_argument("--only", type=int, nargs="*", help="run only these input indices")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--mem-gb", type=float, default=3.0, help="address-space limit per worker (RLIMIT_AS)")
    ap.add_argument("--slow", type=float, default=10.0, help="an input that takes longer than this is a failure")
    ap.add_argument("--rss-mb", type=float, default=1500.0, help="peak RSS above this per input is a failure")
    ap.add_argument("--repeat-every", type=int, default=10, help="analyse every k-th input twice (0: never)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/fuzz_out"), help="where failing inputs are saved")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)

    indices = args.only if args.only else range(args.start, args.start + args.n)
    args.out.mkdir(parents=True, exist_ok=True)
    done = [0]
    t0 = time.monotonic()
    total = len(indices)

    def progress(o: fuzzrun.Outcome) -> None:
        done[0] += 1
        if o.kind == "failure":
            print(f"\n[{o.index}] {o.klass}", file=sys.stderr, flush=True)
        if not args.quiet and (done[0] % 50 == 0 or done[0] == total):
            rate = done[0] / max(time.monotonic() - t0, 1e-9)
            print(f"\r{done[0]} done, {rate:.1f}/s", end="", file=sys.stderr, flush=True)

    report = fuzzrun.run_fuzz(args.seed, indices, jobs=args.jobs, timeout=args.timeout,
                              mem_limit=int(args.mem_gb * (1 << 30)), rss_limit_mb=args.rss_mb, slow_s=args.slow,
                              repeat_every=args.repeat_every, out_dir=args.out, progress=progress)
    print(file=sys.stderr)
    text = report.summary()
    print(text)
    (args.out / "SUMMARY.txt").write_text(text + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
