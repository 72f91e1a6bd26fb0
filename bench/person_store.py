"""The per-worker person store: rocksdict (RocksDB) against LMDB (py-lmdb) on the learner's access pattern.

The learner worker keeps each person's state (a few hundred bytes to 1 KiB, key
``"<model>@<user_id>"``) in a local embedded store behind the ``prefstream.people`` changelog
(``docs/personal.md``, "State at stream scale"). What it does to that store, and what this
benchmark times, on ``--keys`` (1,000,000) keys, values of a random length in
[``--min-bytes``, ``--max-bytes``] (300 – 1,024):

1. **load**: every key written once, in batches of ``--batch`` (5,000) — a restore from the
   changelog, or the first pass of a catch-up;
2. **round**: a snapshot round's batch write of the people it touched: ``--batch`` keys drawn
   Zipf(1.1) over the keys, rewritten in one batch, ``--rounds`` (40) times;
3. **get**: ``--gets`` (200,000) point reads, Zipf(1.1)-drawn keys, one read per call — a person
   evicted from memory coming back on their next event (``person_loader``);
4. **miss**: point reads of keys never written (a person never seen before);
5. the process's RSS growth and the store's size on disk afterwards.

RocksDB runs without its write-ahead log (the changelog is the durable copy: a crashed worker's
store is rebuilt from it) and with a 64 MiB block cache; LMDB with ``sync=False`` /
``metasync=False`` (the same reasoning) and one write transaction per batch. Each backend runs
in its own child process (RSS apart), one after the other, on ``--dir`` (a temporary folder).

The last line is exactly::

    keys= rocksdict_load_per_s= lmdb_load_per_s= rocksdict_round_per_s= lmdb_round_per_s= rocksdict_get_per_s= lmdb_get_per_s= rocksdict_mb= lmdb_mb= lmdb_over_rocksdict_get=

Reproduce: ``python bench/person_store.py`` (``--keys 100000`` for a quick run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def dir_mb(path: str) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20


def keys_values(n: int, lo: int, hi: int, seed: int = 0) -> tuple[list[bytes], list[bytes]]:
    rng = np.random.default_rng(seed)
    keys = [f"capacity-personal@user-{i:07d}".encode() for i in range(n)]
    pool = rng.bytes(hi * 4)
    lens = rng.integers(lo, hi + 1, size=n)
    offs = rng.integers(0, hi * 3, size=n)
    vals = [pool[o:o + ln] for o, ln in zip(offs.tolist(), lens.tolist())]
    return keys, vals


def zipf_index(rng, n: int, size: int, a: float = 1.1) -> np.ndarray:
    return np.minimum(rng.zipf(a, size=size) - 1, n - 1)


class RocksBackend:
    name = "rocksdict"

    def __init__(self, path: str) -> None:
        from rocksdict import Options, Rdict, WriteOptions

        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_max_background_jobs(1)
        from rocksdict import BlockBasedOptions, Cache

        table = BlockBasedOptions()
        table.set_block_cache(Cache(64 * 2**20))
        opts.set_block_based_table_factory(table)
        self.db = Rdict(path, options=opts)
        wo = WriteOptions()
        wo.disable_wal = True
        self.db.set_write_options(wo)

    def put_many(self, items) -> None:
        from rocksdict import WriteBatch

        wb = WriteBatch(raw_mode=True)
        for k, v in items:
            wb.put(k, v)
        self.db.write(wb)

    def get(self, key: bytes):
        return self.db.get(key)

    def close(self) -> None:
        self.db.close()


class LmdbBackend:
    name = "lmdb"

    def __init__(self, path: str) -> None:
        import lmdb

        self.env = lmdb.open(path, map_size=64 * 2**30, sync=False, metasync=False, readahead=False,
                             max_dbs=0, lock=True)

    def put_many(self, items) -> None:
        with self.env.begin(write=True) as txn:
            for k, v in items:
                txn.put(k, v)

    def get(self, key: bytes):
        with self.env.begin(buffers=False) as txn:
            return txn.get(key)

    def close(self) -> None:
        self.env.close()


def run_one(backend: str, path: str, args) -> dict:
    keys, vals = keys_values(args.keys, args.min_bytes, args.max_bytes)
    rng = np.random.default_rng(1)
    base = rss_mb()
    db = (RocksBackend if backend == "rocksdict" else LmdbBackend)(path)
    n, b = len(keys), args.batch
    t = time.perf_counter()
    for i in range(0, n, b):
        db.put_many(zip(keys[i:i + b], vals[i:i + b]))
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(args.rounds):
        idx = zipf_index(rng, n, b)
        db.put_many((keys[i], vals[i]) for i in idx.tolist())
    round_s = time.perf_counter() - t
    idx = zipf_index(rng, n, args.gets).tolist()
    t = time.perf_counter()
    got = 0
    for i in idx:
        got += db.get(keys[i]) is not None
    get_s = time.perf_counter() - t
    assert got == len(idx), (got, len(idx))
    t = time.perf_counter()
    for i in range(args.gets // 4):
        if db.get(b"capacity-personal@nobody-%d" % i) is not None:
            raise AssertionError("a key never written was found")
    miss_s = time.perf_counter() - t
    grown = rss_mb() - base
    db.close()
    return {"load_per_s": n / load_s, "round_per_s": args.rounds * b / round_s, "get_per_s": len(idx) / get_s,
            "miss_per_s": (args.gets // 4) / miss_s, "rss_mb": grown, "disk_mb": dir_mb(path),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--min-bytes", type=int, default=300)
    ap.add_argument("--max-bytes", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--gets", type=int, default=200_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args.child, args.dir, args)))
        return 0
    root = tempfile.mkdtemp(prefix="person-store-", dir=args.dir)
    print(f"# command: python bench/person_store.py {' '.join(sys.argv[1:])}", flush=True)
    print(f"# keys {args.keys:,}, values {args.min_bytes}-{args.max_bytes} B, batch {args.batch:,}, "
          f"rounds {args.rounds}, gets {args.gets:,}; load before {load()}", flush=True)
    res = {}
    try:
        for name in ("rocksdict", "lmdb"):
            path = os.path.join(root, name)
            cmd = [sys.executable, __file__, "--child", name, "--dir", path, "--keys", str(args.keys),
                   "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
                   "--batch", str(args.batch), "--rounds", str(args.rounds), "--gets", str(args.gets)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res[name] = json.loads(out.strip().splitlines()[-1])
            r = res[name]
            print(f"{name:9s}: load {r['load_per_s']:,.0f} keys/s, round writes {r['round_per_s']:,.0f} keys/s, "
                  f"gets {r['get_per_s']:,.0f}/s, misses {r['miss_per_s']:,.0f}/s, RSS +{r['rss_mb']:.0f} MB "
                  f"(peak {r['peak_rss_mb']:.0f} MB), disk {r['disk_mb']:.0f} MB  (load {load()})", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r, m = res["rocksdict"], res["lmdb"]
    print(f"keys={args.keys} rocksdict_load_per_s={r['load_per_s']:.0f} lmdb_load_per_s={m['load_per_s']:.0f} "
          f"rocksdict_round_per_s={r['round_per_s']:.0f} lmdb_round_per_s={m['round_per_s']:.0f} "
          f"rocksdict_get_per_s={r['get_per_s']:.0f} lmdb_get_per_s={m['get_per_s']:.0f} "
          f"rocksdict_mb={r['disk_mb']:.0f} lmdb_mb={m['disk_mb']:.0f} "
          f"lmdb_over_rocksdict_get={m['get_per_s'] / r['get_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
