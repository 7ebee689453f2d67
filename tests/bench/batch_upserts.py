#!/usr/bin/python3
"""Batched replacement upserts by _id against a store, as the feeder writes the archive.

  tests/bench/batch_upserts.py --uri URI --pid STORE_PID [--seconds 15] [--batch 10]
                               [--threads 4] [--keys 200000] [--recordcount 10000000]

Each thread sends unordered bulk writes of `batch` ReplaceOne({_id}, doc, upsert) over the
newest `keys` YCSB keys (user + 12 digits) of a `bench load`ed ycsb.usertable, for
`seconds`. Prints the statements per second and the store's CPU (user + system, from
/proc/PID/stat) per statement. Uses Debian's python3-pymongo (/usr/bin/python3).
"""
import argparse
import os
import random
import threading
import time

from pymongo import MongoClient, ReplaceOne


def store_cpu_seconds(pid):
    fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--uri', required=True)
    ap.add_argument('--pid', type=int, required=True)
    ap.add_argument('--seconds', type=float, default=15)
    ap.add_argument('--batch', type=int, default=10)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--keys', type=int, default=200_000)
    ap.add_argument('--recordcount', type=int, default=10_000_000)
    a = ap.parse_args()
    coll = MongoClient(a.uri).ycsb.usertable
    done = [0] * a.threads
    stop = time.time() + a.seconds

    def worker(t):
        r = random.Random(t)
        while time.time() < stop:
            ops = []
            for _ in range(a.batch):
                key = 'user%012d' % (a.recordcount - 1 - r.randrange(a.keys))
                ops.append(ReplaceOne({'_id': key}, {'_id': key, 'field0': 'x' * 26}, upsert=True))
            coll.bulk_write(ops, ordered=False)
            done[t] += a.batch

    c0, t0 = store_cpu_seconds(a.pid), time.time()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(a.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed, cpu = time.time() - t0, store_cpu_seconds(a.pid) - c0
    n = sum(done)
    print(f'batch {a.batch}: {n / elapsed:,.0f} statements/s, store CPU {1e6 * cpu / n:,.0f} us/statement')


if __name__ == '__main__':
    main()
