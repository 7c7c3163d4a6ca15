"""Long fuzz tier: >= 100,000 mutated inputs per reader of untrusted bytes.

Every input runs in a worker under a memory limit (``RLIMIT_AS``) and a per-input time limit;
the worker is killed and restarted on a hang. Prints inputs/s per reader, the refusal rate,
and every finding (escaping exception, timeout, memory) with its reproducer file, which
``--reproduce FILE --reader NAME`` replays in this process with a traceback.

    python benchmarks/fuzz_readers.py                          # every reader, 100,000 each
    python benchmarks/fuzz_readers.py --reader elf --count 1000000 --seed 7
    python benchmarks/fuzz_readers.py --reader tar --reproduce findings/tar/escape-1-17.bin

Baseline, measured in the same run: the seeds themselves (unmutated) through the same
worker, so ``mutated/s ÷ seeds/s`` shows what the mutations cost relative to good input.
Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fuzz.harness import Reader, Stats, fuzz, reproduce  # noqa: E402
from tests.fuzz.readers import READERS, reader  # noqa: E402


def _baseline(r: Reader, findings: Path, time_limit: float) -> float:
    """Inputs/s for the reader's own seeds, repeated (no mutation)."""
    seeds = list(r.seeds())
    repeated = Reader(r.name, r.run, r.ours, lambda: seeds * max(1, 200 // len(seeds)))
    (stats,) = fuzz([repeated], count=len(repeated.seeds()), seed=0, findings_dir=findings,
                    time_limit=time_limit)  # fmt: skip
    return stats.per_second


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reader", action="append", choices=[r.name for r in READERS])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--time-limit", type=float, default=2.0, help="seconds per input")
    parser.add_argument("--memory-limit", type=int, default=2048, help="MiB per worker")
    parser.add_argument("--findings", type=Path, default=Path("fuzz-findings"))
    parser.add_argument("--reproduce", type=Path, metavar="FILE")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    chosen = [reader(n) for n in args.reader] if args.reader else list(READERS)
    if args.reproduce:
        reproduce(chosen[0], args.reproduce.read_bytes())
        print("no exception")
        return 0

    def show(stats: Stats) -> None:
        print(
            f"{stats.reader:18} {stats.inputs:>8} inputs  {stats.per_second:8.0f}/s  "
            f"{stats.refused / max(stats.inputs, 1):6.1%} refused  "
            f"{len(stats.findings)} findings",
            flush=True,
        )
        for finding in stats.findings[:20]:
            last = finding.detail.strip().splitlines()[-1] if finding.detail.strip() else ""
            print(f"    {finding.kind}: {last}\n      reproducer: {finding.reproducer}")

    print(f"seed {args.seed}, {args.count} inputs per reader, time limit {args.time_limit} s, "
          f"memory limit {args.memory_limit} MiB")  # fmt: skip
    figures = []
    for r in chosen:
        base = _baseline(r, args.findings, args.time_limit)
        (stats,) = fuzz(
            [r], count=args.count, seed=args.seed, findings_dir=args.findings,
            time_limit=args.time_limit, memory_limit=args.memory_limit << 20,
        )  # fmt: skip
        show(stats)
        ratio = stats.per_second / base if base else 0.0
        print(f"    seeds alone: {base:.0f}/s; mutated/seeds ratio {ratio:.2f}")
        figures.append({"reader": r.name, "inputs": stats.inputs, "per_second": stats.per_second,
                        "seeds_per_second": base, "ratio": ratio, "refused": stats.refused,
                        "findings": [str(f.reproducer) for f in stats.findings]})  # fmt: skip
    if args.json:
        print(json.dumps(figures, indent=2))
    return 1 if any(f["findings"] for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
