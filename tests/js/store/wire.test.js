'use strict';
// Raw-socket tests: framing, compression, and malformed input. A malformed frame must make
// the server close that connection or answer with an error; other connections keep working.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startStore } = require('../lib/server');
const W = require('../lib/wire');

let server;
let sentinel; // a connection opened before any abuse; must keep working throughout

before(async () => {
  server = await startStore();
  sentinel = await W.RawConnection.connect(server.port);
});
after(async () => {
  if (sentinel) sentinel.destroy();
  if (server) await server.cleanup(); // also fails the file if the server crashed or a sanitizer fired
});

const ping = { ping: 1, $db: 'admin' };

async function assertHealthy() {
  assert.ok(server.proc.running, `server died\n${server.proc.tail()}`);
  const fresh = await W.RawConnection.connect(server.port);
  try {
    assert.equal((await fresh.command(ping)).ok, 1, 'fresh connection answers');
  } finally {
    fresh.destroy();
  }
  assert.equal((await sentinel.command(ping)).ok, 1, 'pre-existing connection still answers');
}

/** The server either closes the connection or replies with an error document. */
function assertClosedOrError(r, what) {
  if (r.closed) return 'closed';
  assert.ok(!r.parseError, `${what}: server sent an unparseable frame: ${r.parseError}`);
  const doc = r.doc;
  assert.ok(doc, `${what}: reply without a document`);
  const isError = doc.ok === 0 || doc.$err !== undefined || (r.opCode === W.OP.REPLY && r.responseFlags & 2);
  assert.ok(isError, `${what}: expected an error or a close, got ${JSON.stringify(doc)}`);
  return 'error';
}

async function sendMalformed(bytes, what, { halfClose = false } = {}) {
  const c = await W.RawConnection.connect(server.port);
  try {
    await c.send(bytes);
    if (halfClose) c.end();
    const r = await c.next(15_000);
    return assertClosedOrError(r, what);
  } finally {
    c.destroy();
  }
}

// ------------------------------------------------------------------ well-formed

test('OP_MSG ping: reply is OP_MSG with responseTo = requestId', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const f = W.opMsg(ping);
    await c.send(f);
    const r = await c.next();
    assert.equal(r.opCode, W.OP.MSG);
    assert.equal(r.responseTo, f.readInt32LE(4));
    assert.equal(r.doc.ok, 1);
  } finally {
    c.destroy();
  }
});

test('legacy OP_QUERY isMaster on admin.$cmd gets an OP_REPLY', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const f = W.opQuery('admin.$cmd', { isMaster: 1, helloOk: true, client: { driver: { name: 'raw', version: '0' } } });
    await c.send(f);
    const r = await c.next();
    assert.equal(r.opCode, W.OP.REPLY);
    assert.equal(r.responseTo, f.readInt32LE(4));
    assert.equal(r.numberReturned, 1);
    assert.equal(r.doc.ismaster, true);
    assert.equal(r.doc.ok, 1);
    assert.ok(r.doc.maxWireVersion >= 17);
    assert.equal(r.doc.helloOk, true);
  } finally {
    c.destroy();
  }
});

test('OP_QUERY takes only the commands MongoDB 6.0+ takes that way; the rest get 352', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const ask = async (query) => {
      const f = W.opQuery('admin.$cmd', query);
      await c.send(f);
      const r = await c.next();
      assert.equal(r.opCode, W.OP.REPLY);
      assert.equal(r.responseTo, f.readInt32LE(4));
      return r.doc;
    };
    for (const q of [{ buildinfo: 1 }, { buildInfo: 1 }, { hello: 1 }, { _isSelf: 1 }]) assert.equal((await ask(q)).ok, 1, JSON.stringify(q));
    for (const q of [{ ping: 1 }, { listDatabases: 1 }, { find: 'x' }]) {
      const r = await ask(q);
      assert.equal(r.ok, 0);
      assert.equal(r.code, 352);
      assert.match(r.errmsg, new RegExp(`^Unsupported OP_QUERY command: ${Object.keys(q)[0]}\\. The client driver may require an upgrade`));
    }
  } finally {
    c.destroy();
  }
});

test('pipelined requests in one write get replies in order', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const frames = [W.opMsg(ping), W.opMsg({ buildInfo: 1, $db: 'admin' }), W.opMsg(ping)];
    await c.send(Buffer.concat(frames));
    for (const f of frames) {
      const r = await c.next();
      assert.equal(r.responseTo, f.readInt32LE(4));
      assert.equal(r.doc.ok, 1);
    }
  } finally {
    c.destroy();
  }
});

test('a frame dribbled one byte per write is still parsed', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const f = W.opMsg(ping);
    for (let i = 0; i < f.length; i++) await c.send(f.subarray(i, i + 1));
    const r = await c.next();
    assert.equal(r.doc.ok, 1);
  } finally {
    c.destroy();
  }
});

test('OP_MSG with a kind-1 document sequence (insert)', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const r = await c.command(
      { insert: 'seq', $db: 'wire_test', ordered: true },
      { sequences: [{ identifier: 'documents', documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }] }] },
    );
    assert.equal(r.ok, 1);
    assert.equal(r.n, 3);
    const f = await c.command({ find: 'seq', $db: 'wire_test', filter: {}, sort: { _id: 1 } });
    assert.deepEqual(
      f.cursor.firstBatch.map((d) => d._id),
      [1, 2, 3],
    );
  } finally {
    c.destroy();
  }
});

test('moreToCome (fire-and-forget) gets no reply; the next request does', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    await c.send(
      W.opMsg(
        { insert: 'm2c', $db: 'wire_test', documents: [{ _id: 1 }], writeConcern: { w: 0 } },
        { flags: W.MSG_FLAGS.moreToCome },
      ),
    );
    const p = W.opMsg({ find: 'm2c', $db: 'wire_test', filter: {} });
    await c.send(p);
    const r = await c.next();
    assert.equal(r.responseTo, p.readInt32LE(4), 'first reply answers the find, not the insert');
    assert.deepEqual(r.doc.cursor.firstBatch, [{ _id: 1 }]);
  } finally {
    c.destroy();
  }
});

test('reply field types match mongod (drivers such as libmongoc read only int32 counts)', async () => {
  const c = await W.RawConnection.connect(server.port);
  c.bsonOptions = { promoteValues: false };
  const t = (v) => (v && v._bsontype) || typeof v;
  try {
    const ins = await c.command({ insert: 'types', $db: 'wire_test', documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }] });
    assert.equal(t(ins.n), 'Int32', 'insert n');
    assert.equal(t(ins.ok), 'Double', 'ok is a double, as mongod sends it');
    const upd = await c.command({ update: 'types', $db: 'wire_test', updates: [{ q: { _id: 1 }, u: { $set: { a: 1 } } }] });
    assert.equal(t(upd.n), 'Int32', 'update n');
    assert.equal(t(upd.nModified), 'Int32', 'update nModified');
    const ups = await c.command({ update: 'types', $db: 'wire_test', updates: [{ q: { _id: 9 }, u: { $set: { a: 1 } }, upsert: true }] });
    assert.equal(t(ups.upserted[0].index), 'Int32', 'upserted index');
    const del = await c.command({ delete: 'types', $db: 'wire_test', deletes: [{ q: { _id: 2 }, limit: 1 }] });
    assert.equal(t(del.n), 'Int32', 'delete n');
    const cnt = await c.command({ count: 'types', $db: 'wire_test' });
    assert.equal(t(cnt.n), 'Int32', 'count n');
    const f = await c.command({ find: 'types', $db: 'wire_test', batchSize: 1 });
    assert.equal(t(f.cursor.id), 'Long', 'cursor id is int64');
    const dup = await c.command({ insert: 'types', $db: 'wire_test', documents: [{ _id: 1 }] });
    assert.equal(t(dup.writeErrors[0].index), 'Int32', 'writeErrors index');
    assert.equal(t(dup.writeErrors[0].code), 'Int32', 'writeErrors code');
    const err = await c.command({ noSuchCommand: 1, $db: 'admin' });
    assert.equal(t(err.ok), 'Double');
    assert.equal(t(err.code), 'Int32', 'error code');
  } finally {
    c.destroy();
  }
});

for (const compressor of ['zlib', 'snappy']) {
  test(`OP_COMPRESSED (${compressor}) after negotiation; reply decodes`, async () => {
    const c = await W.RawConnection.connect(server.port);
    try {
      await c.send(W.opQuery('admin.$cmd', { isMaster: 1, compression: [compressor] }));
      const hs = await c.next();
      assert.deepEqual(hs.doc.compression, [compressor], 'server agrees to the compressor');
      const big = 'compress-me '.repeat(2000);
      const f = W.opCompressed(W.opMsg({ ping: 1, comment: big, $db: 'admin' }), compressor);
      await c.send(f);
      const r = await c.next();
      assert.ok(!r.closed, 'server kept the connection');
      assert.equal(r.responseTo, f.readInt32LE(4));
      assert.equal(r.opCode, W.OP.MSG);
      assert.equal(r.doc.ok, 1);
    } finally {
      c.destroy();
    }
  });
}

// ------------------------------------------------------------------ malformed

const malformed = [
  ['messageLength 8 (< 16)', () => W.frame(W.OP.MSG, Buffer.alloc(0), { length: 8 })],
  ['messageLength 0', () => W.frame(W.OP.MSG, Buffer.alloc(0), { length: 0 })],
  ['messageLength -1', () => W.frame(W.OP.MSG, Buffer.alloc(0), { length: -1 })],
  ['messageLength 48,000,001 (> max) header only', () => W.frame(W.OP.MSG, Buffer.alloc(0), { length: 48_000_001 })],
  ['messageLength 2^31-1 header only', () => W.frame(W.OP.MSG, Buffer.alloc(0), { length: 0x7fffffff })],
  ['unknown opcode 9999', () => W.frame(9999, W.opMsgBody(ping))],
  ['opcode OP_REPLY sent by a client', () => W.frame(W.OP.REPLY, Buffer.alloc(36))],
  ['OP_MSG with garbage instead of BSON', () => W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), Buffer.from('this is not bson at all!!')]))],
  [
    'OP_MSG whose BSON length exceeds the message',
    () => {
      const doc = Buffer.from(W.BSON.serialize(ping));
      doc.writeInt32LE(doc.length + 1000, 0);
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  [
    'OP_MSG whose BSON length is shorter than its content',
    () => {
      const doc = Buffer.from(W.BSON.serialize({ ping: 1, $db: 'admin', pad: 'xxxxxxxx' }));
      doc.writeInt32LE(10, 0);
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  [
    'OP_MSG with an invalid BSON element type',
    () => {
      const doc = Buffer.from(W.BSON.serialize({ ping: 1, $db: 'admin' }));
      doc[4] = 0x55; // first element's type byte
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  [
    'OP_MSG with a string whose length runs past the document',
    () => {
      const doc = Buffer.from(W.BSON.serialize({ $db: 'admin', ping: 1 }));
      // {$db: "admin"}: type(1) "$db\0"(4) then int32 string length at offset 9.
      doc.writeInt32LE(0x7ffffff0, 9);
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  [
    'OP_MSG BSON without the trailing NUL',
    () => {
      const doc = Buffer.from(W.BSON.serialize(ping));
      doc[doc.length - 1] = 0x01;
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  [
    // 2,000,000 levels of {"": {...}} (14 MB): past mongod's depth limit, and deep enough to
    // overflow the stack of a validator that recurses.
    'OP_MSG body nested 2,000,000 documents deep',
    () => {
      const depth = 2_000_000;
      const nested = Buffer.alloc(6 * depth + 5 + depth);
      for (let i = 0; i < depth; i++) {
        nested.writeInt32LE(5 + 7 * (depth - i), 6 * i);
        nested[6 * i + 4] = 0x03; // embedded document, empty key
      }
      nested.writeInt32LE(5, 6 * depth);
      const head = Buffer.concat([Buffer.from([0x10]), W.cstring('ping'), W.int32(1), Buffer.from([0x03]), W.cstring('x')]);
      const dbField = Buffer.concat([Buffer.from([0x02]), W.cstring('$db'), W.int32(6), W.cstring('admin')]);
      const elements = Buffer.concat([head, nested, dbField]);
      const doc = Buffer.concat([W.int32(elements.length + 5), elements, Buffer.from([0])]);
      return W.frame(W.OP.MSG, Buffer.concat([W.int32(0), Buffer.from([0]), doc]));
    },
  ],
  ['OP_MSG with no sections', () => W.frame(W.OP.MSG, W.int32(0))],
  ['OP_MSG with two body sections', () => W.frame(W.OP.MSG, Buffer.concat([W.opMsgBody(ping), Buffer.from([0]), Buffer.from(W.BSON.serialize(ping))]))],
  ['OP_MSG with unknown section kind 7', () => W.frame(W.OP.MSG, Buffer.concat([W.opMsgBody(ping), Buffer.from([7]), W.int32(5), Buffer.from([0])]))],
  ['OP_MSG with an unknown required flag bit', () => W.opMsg(ping, { flags: 1 << 5 })],
  ['OP_MSG with checksumPresent but too short for a checksum', () => W.frame(W.OP.MSG, Buffer.concat([W.int32(W.MSG_FLAGS.checksumPresent), Buffer.from([0])]))],
  [
    'OP_MSG document sequence larger than the message',
    () => {
      const seq = Buffer.concat([Buffer.from([1]), W.int32(100000), W.cstring('documents')]);
      return W.frame(W.OP.MSG, Buffer.concat([W.opMsgBody({ insert: 'x', $db: 'wire_test' }), seq]));
    },
  ],
  ['OP_COMPRESSED with unknown compressor id 99', () => W.opCompressed(W.opMsg(ping), 'noop', { compressorId: 99 })],
  ['OP_COMPRESSED claiming a 2 GB uncompressed size', () => W.opCompressed(W.opMsg(ping), 'zlib', { uncompressedSize: 0x7fffffff })],
  ['OP_COMPRESSED with a wrong uncompressed size', () => W.opCompressed(W.opMsg(ping), 'zlib', { uncompressedSize: 3 })],
  [
    'OP_COMPRESSED zlib with garbage payload',
    () => {
      const body = Buffer.concat([W.int32(W.OP.MSG), W.int32(100), Buffer.from([2]), Buffer.from('garbage garbage garbage')]);
      return W.frame(W.OP.COMPRESSED, body);
    },
  ],
  ['OP_COMPRESSED wrapping OP_COMPRESSED', () => W.opCompressed(W.opCompressed(W.opMsg(ping), 'zlib'), 'zlib')],
  ['OP_QUERY with an unterminated collection name', () => W.frame(W.OP.QUERY, Buffer.concat([W.int32(0), Buffer.from('admin.$cmd-no-nul')]))],
];

for (const [what, build] of malformed) {
  test(`malformed: ${what} -> closed or error; others unaffected`, async () => {
    await sendMalformed(build(), what);
    await assertHealthy();
  });
}

test('malformed: truncated frame then EOF -> server closes', async () => {
  const full = W.opMsg({ ping: 1, $db: 'admin', pad: 'x'.repeat(100) });
  const outcome = await sendMalformed(full.subarray(0, 40), 'truncated', { halfClose: true });
  assert.equal(outcome, 'closed');
  await assertHealthy();
});

test('malformed: header only, then EOF -> server closes', async () => {
  const outcome = await sendMalformed(W.opMsg(ping).subarray(0, 16), 'header only', { halfClose: true });
  assert.equal(outcome, 'closed');
  await assertHealthy();
});

test('malformed: a partial header (7 bytes) then EOF -> server closes', async () => {
  const outcome = await sendMalformed(Buffer.from([1, 2, 3, 4, 5, 6, 7]), 'partial header', { halfClose: true });
  assert.equal(outcome, 'closed');
  await assertHealthy();
});

test('a connection that errored on a bad command (not framing) stays open', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const bad = await c.command({ noSuchCommand: 1, $db: 'admin' });
    assert.equal(bad.ok, 0);
    assert.equal(bad.code, 59);
    const missingDb = await c.command({ ping: 1 });
    assert.equal(missingDb.ok, 0, 'OP_MSG without $db is an error');
    assert.equal((await c.command(ping)).ok, 1);
  } finally {
    c.destroy();
  }
});

test('many abusive connections at once do not disturb the server', async () => {
  const builds = malformed.map(([, b]) => b);
  await Promise.all(
    builds.map(async (b) => {
      const c = await W.RawConnection.connect(server.port);
      try {
        await c.send(b());
        await c.next(15_000).catch(() => null);
      } finally {
        c.destroy();
      }
    }),
  );
  await assertHealthy();
});

test('names and command names of invalid UTF-8 are refused, and no reply carries invalid UTF-8', async () => {
  // Builds a frame, then turns the byte 'X' of `marker` into 0xff (a JS string cannot hold it).
  const patched = (doc, marker) => {
    const f = W.opMsg(doc);
    const at = f.indexOf(Buffer.from(marker));
    assert.ok(at >= 0);
    f[at + marker.indexOf('X')] = 0xff;
    return f;
  };
  const c = await W.RawConnection.connect(server.port);
  try {
    for (const [doc, marker, code] of [
      [{ insert: 'utfXcoll', documents: [{ _id: 1 }], $db: 'test' }, 'utfXcoll', 73],
      [{ listCollections: 1, $db: 'utfXdb' }, 'utfXdb', 73],
      [{ fiXnd: 'c', $db: 'test' }, 'fiXnd', 59],
    ]) {
      await c.send(patched(doc, marker));
      const r = await c.next();
      assert.ok(!r.closed && !r.parseError, `${marker}: a reply a driver can read (${r.parseError})`);
      assert.equal(r.doc.code, code, JSON.stringify(r.doc));
      assert.match(r.doc.errmsg, /\\xff/, 'the bad byte is shown escaped');
    }
    const names = await c.command({ listCollections: 1, nameOnly: true, $db: 'test' });
    assert.ok(names.cursor.firstBatch.every((x) => !x.name.startsWith('utf')), 'no collection was created');
  } finally {
    c.destroy();
  }
});

test('an awaitable hello with exhaustAllowed streams replies flagged moreToCome, each answering the last', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    const { topologyVersion } = await c.command({ hello: 1, $db: 'admin' });
    assert.ok(topologyVersion, 'hello reports a topologyVersion');
    const req = W.opMsg({ hello: 1, topologyVersion, maxAwaitTimeMS: 20, $db: 'admin' }, { flags: W.MSG_FLAGS.exhaustAllowed });
    await c.send(req);
    let answers = req.readInt32LE(4);
    for (let i = 0; i < 3; i++) {
      const r = await c.next();
      assert.ok(!r.closed, `reply ${i}: connection closed`);
      assert.equal(r.doc.ok, 1);
      assert.equal(r.responseTo, answers, `reply ${i} answers the request, then each the reply before`);
      assert.ok(r.flags & W.MSG_FLAGS.moreToCome, `reply ${i} is flagged moreToCome`);
      assert.deepEqual(r.doc.topologyVersion, topologyVersion);
      answers = r.requestId;
    }
  } finally {
    c.destroy();
  }
  await assertHealthy();
});

test('a hello that cannot stream gets one reply without moreToCome, exhaustAllowed or not', async () => {
  const c = await W.RawConnection.connect(server.port);
  try {
    // Not awaitable (no topologyVersion): answered at once, once.
    const plain = W.opMsg({ hello: 1, $db: 'admin' }, { flags: W.MSG_FLAGS.exhaustAllowed });
    await c.send(plain);
    const r = await c.next();
    assert.equal(r.responseTo, plain.readInt32LE(4));
    assert.equal(r.flags & W.MSG_FLAGS.moreToCome, 0);
    // Awaitable but without exhaustAllowed: one reply after the wait.
    const awaited = W.opMsg({ hello: 1, topologyVersion: r.doc.topologyVersion, maxAwaitTimeMS: 20, $db: 'admin' });
    await c.send(awaited);
    const a = await c.next();
    assert.equal(a.responseTo, awaited.readInt32LE(4));
    assert.equal(a.flags & W.MSG_FLAGS.moreToCome, 0);
    // Nothing else arrives unasked: the next reply answers the next request.
    assert.equal((await c.command(ping)).ok, 1);
  } finally {
    c.destroy();
  }
});
