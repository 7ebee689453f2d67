'use strict';
// Minimal MongoDB wire-protocol framing for raw-socket tests: builds OP_MSG / OP_QUERY /
// OP_COMPRESSED frames (well-formed or deliberately not) and reads replies.

const net = require('node:net');
const zlib = require('node:zlib');
const { BSON } = require('mongodb');

const OP = { REPLY: 1, QUERY: 2004, COMPRESSED: 2012, MSG: 2013 };
const COMPRESSOR = { noop: 0, snappy: 1, zlib: 2, zstd: 3 };
const MSG_FLAGS = { checksumPresent: 1 << 0, moreToCome: 1 << 1, exhaustAllowed: 1 << 16 };

let nextRequestId = 1;
const newRequestId = () => nextRequestId++;

function int32(n) {
  const b = Buffer.alloc(4);
  b.writeInt32LE(n | 0);
  return b;
}

/** A 16-byte header; `length` defaults to 16 + body length. */
function frame(opCode, body, { requestId = newRequestId(), responseTo = 0, length } = {}) {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length === undefined ? 16 + body.length : length, 0);
  h.writeInt32LE(requestId, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return Buffer.concat([h, body]);
}

function cstring(s) {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
}

/** OP_MSG body: flags, kind-0 body section, then kind-1 document sequences. */
function opMsgBody(doc, { flags = 0, sequences = [] } = {}) {
  const parts = [int32(flags), Buffer.from([0]), Buffer.from(BSON.serialize(doc))];
  for (const { identifier, documents } of sequences) {
    const docs = Buffer.concat(documents.map((d) => Buffer.from(BSON.serialize(d))));
    const id = cstring(identifier);
    parts.push(Buffer.from([1]), int32(4 + id.length + docs.length), id, docs);
  }
  return Buffer.concat(parts);
}

function opMsg(doc, opts = {}) {
  return frame(OP.MSG, opMsgBody(doc, opts), opts);
}

function opQuery(ns, query, { flags = 0, skip = 0, nReturn = -1, ...rest } = {}) {
  const body = Buffer.concat([int32(flags), cstring(ns), int32(skip), int32(nReturn), Buffer.from(BSON.serialize(query))]);
  return frame(OP.QUERY, body, rest);
}

function compress(name, data) {
  switch (name) {
    case 'noop':
      return data;
    case 'zlib':
      return zlib.deflateSync(data);
    case 'snappy':
      return require('snappy').compressSync(data);
    default:
      throw new Error(`no compressor ${name} in tests`);
  }
}

function decompress(id, data) {
  switch (id) {
    case COMPRESSOR.noop:
      return data;
    case COMPRESSOR.zlib:
      return zlib.inflateSync(data);
    case COMPRESSOR.snappy:
      return require('snappy').uncompressSync(data);
    default:
      throw new Error(`reply used compressor id ${id}, which the test cannot decode`);
  }
}

/** Wraps a complete frame (header included) in OP_COMPRESSED. */
function opCompressed(innerFrame, compressorName, { uncompressedSize, compressorId, ...rest } = {}) {
  const originalOpcode = innerFrame.readInt32LE(12);
  const innerBody = innerFrame.subarray(16);
  const body = Buffer.concat([
    int32(originalOpcode),
    int32(uncompressedSize === undefined ? innerBody.length : uncompressedSize),
    Buffer.from([compressorId === undefined ? COMPRESSOR[compressorName] : compressorId]),
    compress(compressorName, innerBody),
  ]);
  return frame(OP.COMPRESSED, body, { requestId: innerFrame.readInt32LE(4), ...rest });
}

/**
 * Parses one complete frame into {requestId, responseTo, opCode, doc, ...}.
 * bsonOptions go to BSON.deserialize (e.g. {promoteValues: false} to see int32 vs int64).
 */
function parseFrame(buf, bsonOptions = {}) {
  const msg = {
    length: buf.readInt32LE(0),
    requestId: buf.readInt32LE(4),
    responseTo: buf.readInt32LE(8),
    opCode: buf.readInt32LE(12),
  };
  let body = buf.subarray(16);
  if (msg.opCode === OP.COMPRESSED) {
    msg.compressed = true;
    msg.compressorId = body.readUInt8(8);
    const originalOpcode = body.readInt32LE(0);
    const inner = decompress(msg.compressorId, body.subarray(9));
    if (inner.length !== body.readInt32LE(4)) throw new Error('uncompressedSize mismatch in reply');
    msg.opCode = originalOpcode;
    body = inner;
  }
  if (msg.opCode === OP.MSG) {
    msg.flags = body.readUInt32LE(0);
    let off = 4;
    msg.sequences = {};
    const end = msg.flags & MSG_FLAGS.checksumPresent ? body.length - 4 : body.length;
    while (off < end) {
      const kind = body[off++];
      if (kind === 0) {
        const len = body.readInt32LE(off);
        msg.doc = BSON.deserialize(body.subarray(off, off + len), bsonOptions);
        off += len;
      } else if (kind === 1) {
        const size = body.readInt32LE(off);
        const seqEnd = off + size;
        let p = off + 4;
        const z = body.indexOf(0, p);
        const id = body.subarray(p, z).toString();
        p = z + 1;
        const docs = [];
        while (p < seqEnd) {
          const len = body.readInt32LE(p);
          docs.push(BSON.deserialize(body.subarray(p, p + len), bsonOptions));
          p += len;
        }
        msg.sequences[id] = docs;
        off = seqEnd;
      } else {
        throw new Error(`reply has unknown OP_MSG section kind ${kind}`);
      }
    }
  } else if (msg.opCode === OP.REPLY) {
    msg.responseFlags = body.readInt32LE(0);
    msg.cursorId = body.readBigInt64LE(4);
    msg.numberReturned = body.readInt32LE(16);
    msg.docs = [];
    let off = 20;
    for (let i = 0; i < msg.numberReturned; i++) {
      const len = body.readInt32LE(off);
      msg.docs.push(BSON.deserialize(body.subarray(off, off + len), bsonOptions));
      off += len;
    }
    msg.doc = msg.docs[0];
  }
  return msg;
}

/**
 * A raw TCP connection that splits the byte stream into frames.
 * next(timeoutMs) resolves to the next parsed frame or {closed: true, error?}; rejects only
 * on timeout (the connection is then still open: nothing came and it did not close).
 */
class RawConnection {
  static connect(port, host = '127.0.0.1', timeoutMs = 10_000) {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ port, host });
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new Error('connect timeout'));
      }, timeoutMs);
      sock.once('connect', () => {
        clearTimeout(timer);
        sock.setNoDelay(true);
        resolve(new RawConnection(sock));
      });
      sock.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  constructor(sock) {
    this.sock = sock;
    this.bsonOptions = {}; // set {promoteValues: false} to inspect exact BSON types
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.closed = false;
    this.error = null;
    this.waiters = [];
    sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      while (this.buf.length >= 4) {
        const len = this.buf.readInt32LE(0);
        if (len < 16 || len > 64 * 1024 * 1024) {
          this.error = new Error(`server sent a frame with bad length ${len}`);
          sock.destroy();
          break;
        }
        if (this.buf.length < len) break;
        const f = this.buf.subarray(0, len);
        this.buf = this.buf.subarray(len);
        try {
          this.frames.push(parseFrame(f, this.bsonOptions));
        } catch (e) {
          this.frames.push({ parseError: e });
        }
      }
      this.wake();
    });
    sock.on('error', (e) => {
      this.error = this.error || e;
    });
    sock.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  wake() {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  send(buf) {
    return new Promise((resolve) => {
      if (this.closed) return resolve(false);
      this.sock.write(buf, (err) => resolve(!err));
    });
  }

  /** Half-close: no more bytes from us. */
  end() {
    this.sock.end();
  }

  next(timeoutMs = 10_000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`no reply and no close within ${timeoutMs} ms`));
      }, timeoutMs);
      const check = () => {
        if (this.frames.length) {
          clearTimeout(timer);
          resolve(this.frames.shift());
        } else if (this.closed) {
          clearTimeout(timer);
          resolve({ closed: true, error: this.error });
        } else {
          this.waiters.push(check);
        }
      };
      check();
    });
  }

  /** Sends an OP_MSG command and returns the reply document (throws if closed). */
  async command(doc, opts = {}) {
    const f = opMsg(doc, opts);
    await this.send(f);
    const r = await this.next();
    if (r.closed) throw new Error(`connection closed instead of replying to ${JSON.stringify(Object.keys(doc))}`);
    if (r.responseTo !== f.readInt32LE(4)) throw new Error(`responseTo ${r.responseTo} != requestId`);
    return r.doc;
  }

  destroy() {
    this.sock.destroy();
  }
}

module.exports = {
  OP,
  COMPRESSOR,
  MSG_FLAGS,
  int32,
  cstring,
  frame,
  opMsgBody,
  opMsg,
  opQuery,
  opCompressed,
  parseFrame,
  newRequestId,
  RawConnection,
  BSON,
};
