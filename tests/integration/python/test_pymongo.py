#!/usr/bin/python3
"""pymongo against `halocline store`.

Run: /usr/bin/python3 -m unittest discover -s tests/integration/python -v
 or: /usr/bin/python3 tests/integration/python/test_pymongo.py

Starts its own server (HALOCLINE_BIN, else build/asan-ubsan or build/debug), on --port 0
with a fresh --dbpath; learns the port from the "Waiting for connections" log line.
"""
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

import pymongo
from bson.int64 import Int64
from pymongo import MongoClient, monitoring
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
READY_TIMEOUT_S = 30
STOP_TIMEOUT_S = 30


def halocline_binary():
    env = os.environ.get("HALOCLINE_BIN")
    if env:
        return env
    for rel in ("build/asan-ubsan/src/cli/halocline", "build/debug/src/cli/halocline",
                "build/release/src/cli/halocline"):
        p = os.path.join(REPO, rel)
        if os.path.exists(p):
            return p
    raise RuntimeError("halocline binary not found: set HALOCLINE_BIN or build it")


class Store:
    """A `halocline store` child process; start() waits for the port log line."""

    def __init__(self):
        self.dbpath = tempfile.mkdtemp(prefix="halocline-py-")
        self.proc = None
        self.port = None
        self.tail = []
        self.sanitizer = []  # AddressSanitizer/UBSan report lines seen on the output

    def start(self):
        self.proc = subprocess.Popen(
            [halocline_binary(), "store", "--port", "0", "--dbpath", self.dbpath],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        ports = queue.Queue()

        def pump():
            for line in self.proc.stdout:  # keeps draining after ready
                self.tail = (self.tail + [line.rstrip("\n")])[-100:]
                if "ERROR: AddressSanitizer" in line or "runtime error:" in line:
                    self.sanitizer.append(line.rstrip("\n"))
                if line.startswith("{"):
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if rec.get("msg") == "Waiting for connections":
                        ports.put(rec.get("attr", {}).get("port"))
            ports.put(None)  # EOF: process exited

        threading.Thread(target=pump, daemon=True).start()
        try:
            port = ports.get(timeout=READY_TIMEOUT_S)
        except queue.Empty:
            self.kill()
            raise RuntimeError("server not ready in time:\n" + "\n".join(self.tail))
        if not isinstance(port, int):
            self.kill()
            raise RuntimeError("server exited before ready:\n" + "\n".join(self.tail))
        self.port = port
        return self

    def uri(self, **params):
        q = "&".join(["directConnection=true"] + ["%s=%s" % kv for kv in params.items()])
        return "mongodb://127.0.0.1:%d/?%s" % (self.port, q)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self):
        """SIGTERM and wait; returns the exit code (kills and raises on hang)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError("server did not exit on SIGTERM")
        return self.proc.returncode

    def cleanup(self):
        try:
            return self.stop()
        finally:
            shutil.rmtree(self.dbpath, ignore_errors=True)


class Recorder(monitoring.CommandListener):
    def __init__(self):
        self.events = []

    def started(self, event):
        pass

    def succeeded(self, event):
        self.events.append(event)

    def failed(self, event):
        pass

    def count(self, name):
        return sum(1 for e in self.events if e.command_name == name)


STORE = None
RECORDER = Recorder()
CLIENT = None


def setUpModule():
    global STORE, CLIENT
    STORE = Store().start()
    CLIENT = MongoClient(STORE.uri(), serverSelectionTimeoutMS=10000, event_listeners=[RECORDER])
    CLIENT.admin.command("ping")


def tearDownModule():
    if CLIENT is not None:
        CLIENT.close()
    if STORE is not None:
        crashed = STORE.proc.poll() is not None  # exited before we asked it to
        code = STORE.cleanup()
        if crashed or code != 0 or STORE.sanitizer:
            raise RuntimeError("server %s (exit %r); sanitizer: %s\n%s" % (
                "crashed" if crashed else "stopped badly", code, STORE.sanitizer, "\n".join(STORE.tail)))


class Base(unittest.TestCase):
    counter = 0

    def coll(self):
        Base.counter += 1
        return CLIENT.pytest["c%d" % Base.counter]


class TestHandshake(Base):
    def test_ping_hello_buildinfo(self):
        self.assertEqual(CLIENT.admin.command("ping")["ok"], 1)
        hello = CLIENT.admin.command("hello")
        self.assertTrue(hello["isWritablePrimary"])
        self.assertEqual(hello["maxBsonObjectSize"], 16 * 1024 * 1024)
        info = CLIENT.server_info()
        self.assertRegex(info["version"], r"^\d+\.\d+\.\d+")

    def test_compressors(self):
        names = ["zlib"]
        try:
            import snappy  # noqa: F401
            names.append("snappy")
        except ImportError:
            pass
        try:
            import zstandard  # noqa: F401
            names.append("zstd")
        except ImportError:
            pass
        for name in names + [",".join(names)]:
            with self.subTest(compressors=name):
                c = MongoClient(STORE.uri(compressors=name), serverSelectionTimeoutMS=10000)
                try:
                    comment = "abcdefgh" * 8192
                    self.assertEqual(c.admin.command("ping", comment=comment)["ok"], 1)
                    coll = c.pytest["compress_" + name.replace(",", "_")]
                    doc = {"_id": 1, "blob": "xyz" * 10000}
                    coll.insert_one(doc)
                    self.assertEqual(coll.find_one({"_id": 1}), doc)
                finally:
                    c.close()
        if len(names) < 3:
            self.skipTest("python3-snappy/python3-zstandard not installed; tested only " + ",".join(names))


class TestCrud(Base):
    def test_insert_find_update_delete(self):
        c = self.coll()
        r = c.insert_one({"_id": 1, "a": 1, "tags": ["x"]})
        self.assertEqual(r.inserted_id, 1)
        c.insert_many([{"_id": i, "a": i % 3} for i in range(2, 11)])
        self.assertEqual(c.count_documents({}), 10)
        self.assertEqual(c.count_documents({"a": 1}), 4)
        self.assertEqual(c.estimated_document_count(), 10)
        got = [d["_id"] for d in c.find({"a": {"$gte": 1}}, sort=[("_id", -1)], skip=1, limit=3)]
        self.assertEqual(got, [8, 7, 5])
        self.assertEqual(c.find_one({"_id": 1}, {"tags": 1, "_id": 0}), {"tags": ["x"]})
        u = c.update_many({"a": 0}, {"$inc": {"a": 10}, "$set": {"flag": True}})
        self.assertEqual((u.matched_count, u.modified_count), (3, 3))
        u = c.update_one({"_id": 99}, {"$set": {"a": 5}}, upsert=True)
        self.assertEqual(u.upserted_id, 99)
        r = c.replace_one({"_id": 2}, {"replaced": True})
        self.assertEqual(r.modified_count, 1)
        self.assertEqual(c.find_one({"_id": 2}), {"_id": 2, "replaced": True})
        self.assertEqual(c.delete_one({"a": 10}).deleted_count, 1)
        self.assertEqual(c.delete_many({"a": 10}).deleted_count, 2)
        self.assertEqual(sorted(c.distinct("a")), [1, 2, 5])

    def test_find_one_and_modify(self):
        c = self.coll()
        c.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
        before = c.find_one_and_update({}, {"$inc": {"n": 10}}, sort=[("n", -1)])
        self.assertEqual(before, {"_id": 2, "n": 2})
        after = c.find_one_and_update({"_id": 1}, {"$inc": {"n": 10}},
                                      return_document=pymongo.ReturnDocument.AFTER,
                                      projection={"_id": 0})
        self.assertEqual(after, {"n": 11})
        self.assertEqual(c.find_one_and_replace({"_id": 1}, {"r": 1}), {"_id": 1, "n": 11})
        self.assertEqual(c.find_one_and_delete({"_id": 2}), {"_id": 2, "n": 12})
        self.assertIsNone(c.find_one_and_delete({"_id": 2}))
        up = c.find_one_and_update({"_id": 3}, {"$set": {"n": 3}}, upsert=True,
                                   return_document=pymongo.ReturnDocument.AFTER)
        self.assertEqual(up, {"_id": 3, "n": 3})

    def test_types_round_trip(self):
        import datetime
        from bson import Decimal128, ObjectId
        c = self.coll()
        doc = {"_id": ObjectId(), "i": 1, "l": Int64(2 ** 40), "f": 1.25, "d": Decimal128("3.14"),
               "s": "ünï", "b": b"\x00\x01", "t": datetime.datetime(2020, 1, 2, 3, 4, 5),
               "n": None, "arr": [1, [2], {"x": 3}], "o": {"p": {"q": True}}}
        c.insert_one(doc)
        back = c.find_one({"_id": doc["_id"]})
        self.assertEqual(back, doc)
        self.assertIsInstance(back["l"], Int64)
        self.assertEqual(list(back.keys()), list(doc.keys()))


class TestCursors(Base):
    def test_many_batches(self):
        c = self.coll()
        c.insert_many([{"_id": i, "v": -i} for i in range(1000)])
        before = RECORDER.count("getMore")
        ids = [d["_id"] for d in c.find({}, batch_size=7, sort=[("_id", 1)])]
        self.assertEqual(ids, list(range(1000)))
        self.assertEqual(RECORDER.count("getMore") - before, 142)
        vs = [d["v"] for d in c.find({"v": {"$lt": -100}}, batch_size=13).sort("v", -1)]
        self.assertEqual(vs, list(range(-101, -1000, -1)))

    def test_close_then_getmore_is_cursor_not_found(self):
        c = self.coll()
        c.insert_many([{"_id": i} for i in range(50)])
        reply = c.database.command("find", c.name, batchSize=5)
        cid = reply["cursor"]["id"]
        self.assertNotEqual(cid, 0)
        killed = c.database.command("killCursors", c.name, cursors=[cid])
        self.assertEqual(killed["cursorsKilled"], [cid])
        with self.assertRaises(OperationFailure) as cm:
            c.database.command("getMore", cid, collection=c.name)
        self.assertEqual(cm.exception.code, 43)

    def test_aggregate_batches(self):
        c = self.coll()
        c.insert_many([{"_id": i, "k": i % 4} for i in range(400)])
        out = list(c.aggregate([{"$match": {"k": {"$ne": 0}}}, {"$sort": {"_id": -1}}], batchSize=9))
        self.assertEqual(len(out), 300)
        self.assertEqual(out[0]["_id"], 399)


class TestAggregate(Base):
    def test_group_sort_project_count(self):
        c = self.coll()
        c.insert_many([{"item": "a", "q": 1}, {"item": "b", "q": 5}, {"item": "a", "q": 3}])
        r = list(c.aggregate([{"$group": {"_id": "$item", "t": {"$sum": "$q"}}}, {"$sort": {"t": -1}},
                              {"$project": {"_id": 0, "item": "$_id", "t": 1}}]))
        self.assertEqual(r, [{"t": 5, "item": "b"}, {"t": 4, "item": "a"}])
        self.assertEqual(list(c.aggregate([{"$match": {"item": "a"}}, {"$count": "n"}])), [{"n": 2}])
        self.assertEqual(list(c.aggregate([{"$skip": 1}, {"$limit": 1}, {"$project": {"_id": 0, "q": 1}}])),
                         [{"q": 5}])


class TestIndexes(Base):
    def test_create_list_drop_unique(self):
        c = self.coll()
        self.assertEqual(c.create_index([("a", 1), ("b", -1)]), "a_1_b_-1")
        self.assertEqual(c.create_index("email", unique=True), "email_1")
        c.create_index("s", unique=True, sparse=True)
        c.create_index("p", unique=True, partialFilterExpression={"on": True})
        info = c.index_information()
        self.assertEqual(sorted(info), ["_id_", "a_1_b_-1", "email_1", "p_1", "s_1"])
        self.assertTrue(info["email_1"]["unique"])
        c.insert_one({"_id": 1, "email": "x"})
        with self.assertRaises(DuplicateKeyError) as cm:
            c.insert_one({"_id": 2, "email": "x"})
        self.assertEqual(cm.exception.code, 11000)
        c.insert_many([{"_id": 3, "email": "y"}, {"_id": 4, "email": "z"}])  # no s: sparse allows
        # Partial unique index: equal keys allowed outside the filter, refused inside it.
        c.insert_many([{"_id": 5, "email": "w", "p": 1}, {"_id": 6, "email": "v", "p": 1}])
        c.update_one({"_id": 5}, {"$set": {"on": True}})
        with self.assertRaises(DuplicateKeyError):
            c.update_one({"_id": 6}, {"$set": {"on": True}})
        c.drop_index("a_1_b_-1")
        self.assertNotIn("a_1_b_-1", c.index_information())
        with self.assertRaises(OperationFailure) as cm:
            c.drop_index("a_1_b_-1")
        self.assertEqual(cm.exception.code, 27)


class TestErrors(Base):
    def test_bulk_write_errors(self):
        c = self.coll()
        with self.assertRaises(BulkWriteError) as cm:
            c.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}], ordered=True)
        d = cm.exception.details
        self.assertEqual(d["nInserted"], 1)
        self.assertEqual([(e["index"], e["code"]) for e in d["writeErrors"]], [(1, 11000)])
        with self.assertRaises(BulkWriteError) as cm:
            c.insert_many([{"_id": 1}, {"_id": 3}, {"_id": 3}, {"_id": 4}], ordered=False)
        d = cm.exception.details
        self.assertEqual(d["nInserted"], 2)
        self.assertEqual([(e["index"], e["code"]) for e in d["writeErrors"]], [(0, 11000), (2, 11000)])

    def test_operation_failure_codes(self):
        c = self.coll()
        c.insert_one({"a": 1})
        cases = [
            (lambda: CLIENT.admin.command("noSuchCommand"), 59),
            (lambda: list(c.find({"a": {"$foo": 1}})), 2),
            (lambda: c.update_one({}, {"$foo": {"a": 1}}), 9),
            (lambda: c.update_one({}, {"$inc": {"a": "x"}}), 14),
            (lambda: c.update_one({}, {"$set": {"_id": 5}}), 66),
            (lambda: list(c.aggregate([{"$bogus": {}}])), 40324),
            (lambda: c.database.command("create", c.name), 48),
        ]
        for fn, code in cases:
            with self.subTest(code=code):
                with self.assertRaises(OperationFailure) as cm:
                    fn()
                self.assertEqual(cm.exception.code, code, str(cm.exception))
        self.assertEqual(CLIENT.admin.command("ping")["ok"], 1)


class TestAdmin(Base):
    def test_databases_and_collections(self):
        db = CLIENT.py_admin
        db.a.insert_one({})
        db.create_collection("b")
        self.assertIn("py_admin", CLIENT.list_database_names())
        self.assertEqual(sorted(db.list_collection_names()), ["a", "b"])
        db.a.rename("c")
        self.assertEqual(sorted(db.list_collection_names()), ["b", "c"])
        db.drop_collection("b")
        self.assertEqual(db.list_collection_names(), ["c"])
        self.assertEqual(db.command("collStats", "c")["count"], 1)
        self.assertEqual(db.command("dbStats")["collections"], 1)
        CLIENT.drop_database("py_admin")
        self.assertNotIn("py_admin", CLIENT.list_database_names())


if __name__ == "__main__":
    unittest.main(verbosity=2)
