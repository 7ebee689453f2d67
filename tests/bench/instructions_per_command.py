#!/usr/bin/python3
"""Instructions the store executes per command on its hot paths, counted by
callgrind: repeatable to a fraction of a percent even while other work shares
the machine, unlike throughput. Prints one line per command kind.

  tests/bench/instructions_per_command.py [--bin build/release/src/cli/halocline] [--ops 2000] [--proxy] [--keep DIR]

Starts `halocline store --replSet rs0` under `valgrind --tool=callgrind` with
instrumentation off, loads 2,000 documents of ~120 bytes and warms every path
up, then for each kind turns instrumentation on around N commands sent one at
a time by pymongo (which adds lsid, $clusterTime and, for writes, txnNumber, as
drivers do) and divides the store's whole instruction count, every thread
included, by N. With --proxy it counts the proxy's instructions instead: two
stores (fast tier and archive, not instrumented) and `halocline proxy` under
callgrind, the same commands sent through it to an untiered collection (its
pass-through path: dispatch, forwarding, reply rewriting). With --tiered as well, the
commands go to a tiered collection instead (`bench.tiered`, age field `date`, every
document recent, so reads by `_id` are answered by the fast tier and writes land there):
the proxy's tiered path, its extra fast-tier round trips included in the store's count
but not in the proxy's.
Needs valgrind and Debian's python3-pymongo (/usr/bin/python3).
A benchmark: it prints figures and asserts nothing.
"""
import argparse
import datetime
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from pymongo import MongoClient


def start(cmd, log_path):
    """Starts a halocline process and returns (process, its port)."""
    log = open(log_path, "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r'"Waiting for connections".*?"port":(\d+)', log.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    sys.exit("did not start; see " + log_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/src/cli/halocline")
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--proxy", action="store_true", help="count the proxy's instructions")
    ap.add_argument("--tiered", action="store_true",
                    help="with --proxy: the commands on a tiered collection")
    ap.add_argument("--keep", metavar="DIR",
                    help="copy the callgrind dumps (one per command kind) to DIR, for callgrind_annotate")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="halo-instr-")
    out = os.path.join(work, "callgrind.out")
    grind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    procs = []
    try:
        if not args.proxy:
            proc, port = start(grind + [args.bin, "store", "--port", "0", "--dbpath",
                                        os.path.join(work, "db"), "--replSet", "rs0"],
                               os.path.join(work, "store.log"))
            procs.append(proc)
        else:
            ports = {}
            for tier in ("fast", "archive"):
                proc, ports[tier] = start([args.bin, "store", "--port", "0", "--dbpath",
                                           os.path.join(work, tier), "--replSet", tier],
                                          os.path.join(work, tier + ".log"))
                procs.append(proc)
            config = os.path.join(work, "proxy.yaml")
            with open(config, "w") as f:
                f.write("net: {bindIp: 127.0.0.1, port: 0}\n"
                        "tiers:\n"
                        f"  fast: {{uri: 'mongodb://127.0.0.1:{ports['fast']}/?replicaSet=fast'}}\n"
                        f"  archive: {{uri: 'mongodb://127.0.0.1:{ports['archive']}/?replicaSet=archive'}}\n"
                        "tiering:\n"
                        "  collections: [{namespace: bench.tiered, ageField: date, horizon: 30d}]\n"
                        "workers: {enabled: false}\n")
            proc, port = start(grind + [args.bin, "proxy", "--config", config],
                               os.path.join(work, "proxy.log"))
            procs.append(proc)
        measure(port, proc.pid, args.ops, out, args.tiered)
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait()
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for dump in glob.glob(out + ".*"):
                shutil.copy(dump, args.keep)
        shutil.rmtree(work, ignore_errors=True)


def control(pid, *words):
    subprocess.run(["callgrind_control", *words, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(port, pid, n, out, tiered=False):
    client = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
    coll = client.bench.tiered if tiered else client.bench.ops
    if not tiered:
        coll.drop()
    # A tiered collection's documents carry its age field, recent.
    now = datetime.datetime.now(datetime.timezone.utc)
    aged = (lambda d: {**d, "date": now}) if tiered else (lambda d: d)
    coll.insert_many([aged({"_id": i, "field0": "x" * 100, "n": 0}) for i in range(2000)])
    for i in range(200):  # warm every path up
        coll.find_one({"_id": i})
        coll.update_one({"_id": i}, {"$inc": {"n": 1}})
        coll.insert_one(aged({"_id": 100000 + i, "field0": "y" * 100}))
        list(coll.find({}, batch_size=2).limit(4))
    kinds = [
        ("find by _id", lambda i: coll.find_one({"_id": i % 2000})),
        ("insert one", lambda i: coll.insert_one(aged({"_id": 200000 + i, "field0": "z" * 100}))),
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
