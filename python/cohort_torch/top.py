"""cohort-top for a Python job: watches who the ranks wait for through the
job's store when that store is torch's TCPStore (env:// under torch),
which the C++ cohort-top does not speak (docs/stragglers.md).

    python -m cohort_torch.top [--group NAME] [--once] [--interval S] [--timeout S] HOST:PORT

The same screen, exit codes and messages as cohort-top: 0 after --once, 1
when the job ends while watched, 2 when there is no job to watch.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch.distributed as dist

from ._C import _top_screen

_GROUPS = "cohort/stragglers/groups"


class _Stop(Exception):
    def __init__(self, code, why):
        super().__init__(why)
        self.code = code


def _seconds(text):
    value = float(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"takes seconds (0 < S <= 3600), not '{text}'")
    return value


class _Watcher:
    def __init__(self, args):
        self.args = args
        self.address = args.address
        self.watching = False
        self.last_updated = None
        self.stale = 0
        host, _, port = args.address.rpartition(":")
        if not host or not port.isdigit():
            raise _Stop(2, f"'{args.address}' is not HOST:PORT")
        try:
            self.store = dist.TCPStore(
                host, int(port), is_master=False, timeout=datetime.timedelta(seconds=args.timeout)
            )
        except Exception as e:  # torch raises DistNetworkError, RuntimeError or TimeoutError
            raise _Stop(2, f"no store answers at {self.address} ({e}): is a job running there?") from e

    def _call(self, f):
        try:
            return f()
        except Exception as e:
            if self.watching:
                raise _Stop(1, f"the job at {self.address} ended while watched: {e}") from e
            raise _Stop(2, f"the store at {self.address}: {e}") from e

    def _wait_for(self, key, otherwise):
        until = time.monotonic() + self.args.timeout
        while not self._call(lambda: self.store.check([key])):
            if time.monotonic() >= until:
                raise _Stop(1 if self.watching else 2, f"the store at {self.address} {otherwise}")
            time.sleep(0.1)
        self.watching = True

    def _json(self, key):
        value = self._call(lambda: self.store.get(key))
        try:
            return json.loads(value)
        except ValueError as e:
            raise _Stop(2, f"the store at {self.address} holds a {key} that is not JSON: {e}") from e

    def find_group(self):
        self._wait_for(
            _GROUPS,
            f"holds no cohort job's straggler accounting yet (no key {_GROUPS}): not a cohort job, one "
            "that has not run a collective, or one with COHORT_STRAGGLER_INTERVAL_S=0",
        )
        names = [n for n in self._call(lambda: self.store.get(_GROUPS)).decode().split("\n") if n]
        if self.args.group is None:
            self.group = names[0]
        elif self.args.group in names:
            self.group = self.args.group
        else:
            groups = ", ".join(names)
            raise _Stop(2, f"the job at {self.address} has no group '{self.args.group}'; its groups: {groups}")

    def screen(self):
        key = f"cohort/stragglers/{self.group}/summary"
        self._wait_for(key, f"has group {self.group} but no summary of it yet")
        summary = self._json(key)
        until = time.monotonic() + self.args.timeout
        while self.args.once and summary.get("collectives", 0) == 0 and time.monotonic() < until:
            time.sleep(0.2)
            summary = self._json(key)
        keys = [f"cohort/stragglers/{self.group}/rank/{r}" for r in range(summary["size"])]
        records = ["null"] * len(keys)
        if self._call(lambda: self.store.check(keys)):
            records = [v.decode() for v in self._call(lambda: self.store.multi_get(keys))]
        clear = "\033[H\033[2J" if not self.args.once and os.isatty(1) else ""
        sys.stdout.write(clear + _top_screen(self.address, self.group, json.dumps(summary), records))
        sys.stdout.flush()
        if summary.get("updated_us") == self.last_updated:
            self.stale += 1
            if self.stale * self.args.interval > 5 + 3 * self.args.interval:
                raise _Stop(1, f"the job at {self.address} stopped publishing: it ended while watched")
        else:
            self.stale, self.last_updated = 0, summary.get("updated_us")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m cohort_torch.top", description=__doc__.splitlines()[0])
    parser.add_argument("--group")
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--interval", type=_seconds, default=1.0)
    parser.add_argument("--timeout", type=_seconds, default=10.0)
    parser.add_argument("address", metavar="HOST:PORT")
    args = parser.parse_args(argv)
    try:
        watcher = _Watcher(args)
        watcher.find_group()
        while True:
            watcher.screen()
            if args.once:
                return 0
            time.sleep(args.interval)
    except _Stop as s:
        print(f"cohort_torch.top: {s}", file=sys.stderr)
        return s.code


if __name__ == "__main__":
    sys.exit(main())
