#!/usr/bin/python3
"""Instructions the store executes per command on its hot paths, counted by
callgrind: repeatable to a fraction of a percent even while other work shares
the machine, unlike throughput. Prints one line per command kind.

  tests/bench/instructions_per_command.py [--bin build/release/src/cli/halocline] [--ops 2000]

Starts `halocline store --replSet rs0` under `valgrind --tool=callgrind` with
instrumentation off, loads 2,000 documents of ~120 bytes and warms every path
up, then for each kind turns instrumentation on around N commands sent one at
a time by pymongo (which adds lsid, $clusterTime and, for writes, txnNumber, as
drivers do) and divides the store's whole instruction count, every thread
included, by N. Needs valgrind and Debian's python3-pymongo (/usr/bin/python3).
A benchmark: it prints figures and asserts nothing.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from pymongo import MongoClient


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/src/cli/halocline")
    ap.add_argument("--ops", type=int, default=2000)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="halo-instr-")
    out = os.path.join(work, "callgrind.out")
    log = open(os.path.join(work, "store.log"), "w+")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         args.bin, "store", "--port", "0", "--dbpath", os.path.join(work, "db"), "--replSet", "rs0"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.time() + 120
        while port is None and time.time() < deadline:
            log.seek(0)
            m = re.search(r'"Waiting for connections".*?"port":(\d+)', log.read())
            port = int(m.group(1)) if m else None
            time.sleep(0.2)
        if port is None:
            sys.exit("the store did not start; see " + log.name)
        measure(port, proc.pid, args.ops, out)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def control(pid, *words):
    subprocess.run(["callgrind_control", *words, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(port, pid, n, out):
    client = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
    coll = client.bench.ops
    coll.drop()
    coll.insert_many([{"_id": i, "field0": "x" * 100, "n": 0} for i in range(2000)])
    for i in range(200):  # warm every path up
        coll.find_one({"_id": i})
        coll.update_one({"_id": i}, {"$inc": {"n": 1}})
        coll.insert_one({"_id": 100000 + i, "field0": "y" * 100})
        list(coll.find({}, batch_size=2).limit(4))
    kinds = [
        ("find by _id", lambda i: coll.find_one({"_id": i % 2000})),
        ("insert one", lambda i: coll.insert_one({"_id": 200000 + i, "field0": "z" * 100})),
        ("update one by _id ($inc)", lambda i: coll.update_one({"_id": i % 2000}, {"$inc": {"n": 1}})),
        ("find batchSize 1 + 2 getMores",
         lambda i: list(coll.find({"_id": {"$gte": (i * 3) % 1900}}, batch_size=1).limit(3))),
        ("ping", lambda i: client.admin.command("ping")),
    ]
    print(f"{'command':32} {'instructions/op':>16}")
    for k, (name, op) in enumerate(kinds):
        control(pid, "-z")
        control(pid, "-i", "on")
        for i in range(n):
            op(i)
        control(pid, "-i", "off")
        control(pid, "-d", f"kind{k}")
        dumps = sorted(glob.glob(out + ".*"), key=os.path.getmtime)
        with open(dumps[-1]) as f:
            total = int(re.search(r"^totals: (\d+)", f.read(), re.M).group(1))
        print(f"{name:32} {total // n:>16,}", flush=True)


if __name__ == "__main__":
    main()
