'use strict';
// A TCP relay between a client and a server that forwards whole wire frames and records the
// header of each in both directions (opCode, and for OP_COMPRESSED the original opcode and
// compressor id). Bytes are forwarded untouched. Used to prove that compression was really
// negotiated, and to inject faults real networks produce: the server executed a command
// but its reply never reached the client (the connection broke in between), or reached
// it late (held until the test lets it go).

const net = require('node:net');
const { BSON } = require('bson');

const COMPRESSOR_NAMES = { 0: 'noop', 1: 'snappy', 2: 'zlib', 3: 'zstd' };
const OP_MSG = 2013;
const OP_COMPRESSED = 2012;

/** The command name of an uncompressed OP_MSG request (its body's first key), else null. */
function commandName(frame) {
  if (frame.readInt32LE(12) !== OP_MSG || frame.length < 27 || frame[20] !== 0) return null;
  const end = frame.indexOf(0, 26);
  return end < 0 ? null : frame.toString('utf8', 26, end);
}

/** The body of an uncompressed OP_MSG request as an object, else null. */
function commandBody(frame) {
  if (frame.readInt32LE(12) !== OP_MSG || frame.length < 26 || frame[20] !== 0) return null;
  try {
    return BSON.deserialize(frame.subarray(21, 21 + frame.readInt32LE(21)));
  } catch {
    return null;
  }
}

/** Calls onFrame(frame) for each whole frame in the byte stream fed to the returned function. */
function frameSplitter(onFrame, onGarbage) {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 4) {
      const len = buf.readInt32LE(0);
      if (len < 16) {
        onGarbage(buf); // not a frame stream we understand: pass the rest through
        buf = Buffer.alloc(0);
        return;
      }
      if (buf.length < len) return;
      onFrame(buf.subarray(0, len));
      buf = buf.subarray(len);
    }
  };
}

/**
 * Starts a relay to 127.0.0.1:targetPort. Resolves {port, frames, dropReplyOnce(name),
 * holdReplyOnce(name), blackhole(), reset(), heal(), mode, dropped, close()}.
 * dropReplyOnce(name): the next reply to a `name` command is not forwarded; the relay closes
 * that connection instead (the server ran the command, the client sees the connection fail).
 * Resolves when that has happened.
 */
function startRelay(targetPort) {
  const frames = [];
  const sockets = new Set();
  const armed = []; // {name, resolve}
  const relay = { frames, dropped: [], mode: 'pass' };
  const swallowed = new Set(); // client sockets accepted while blackholed: never forwarded
  const server = net.createServer((client) => {
    if (relay.mode === 'reset') {
      client.destroy();
      return;
    }
    if (relay.mode === 'blackhole') {
      // Accepted, read and never answered: what a partition looks like from this side.
      swallowed.add(client);
      client.on('data', () => {});
      client.on('error', () => {});
      client.on('close', () => swallowed.delete(client));
      return;
    }
    const upstream = net.connect({ port: targetPort, host: '127.0.0.1' });
    sockets.add(client);
    sockets.add(upstream);
    const requests = new Map(); // requestID -> command name
    const done = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    const record = (dir, f) => {
      const entry = { dir, opCode: f.readInt32LE(12), length: f.length };
      if (entry.opCode === OP_COMPRESSED && f.length >= 25) {
        entry.originalOpcode = f.readInt32LE(16);
        entry.compressor = COMPRESSOR_NAMES[f.readUInt8(24)] || `id${f.readUInt8(24)}`;
      }
      frames.push(entry);
    };
    client.on(
      'data',
      frameSplitter(
        (f) => {
          if (relay.mode === 'blackhole') return; // the request is lost on the way
          record('c2s', f);
          const name = commandName(f);
          if (name) requests.set(f.readInt32LE(4), { name, frame: f });
          upstream.write(f);
        },
        (rest) => upstream.write(rest),
      ),
    );
    upstream.on(
      'data',
      frameSplitter(
        (f) => {
          if (relay.mode === 'blackhole') return; // the reply is lost on the way
          record('s2c', f);
          const req = requests.get(f.readInt32LE(8));
          requests.delete(f.readInt32LE(8));
          const name = req && req.name;
          const i = armed.findIndex((a) => a.name === name && (!a.match || a.match(commandBody(req.frame))));
          if (i >= 0) {
            const [a] = armed.splice(i, 1);
            if (a.hold) {
              // Held: the server has run the command; the client waits for its reply.
              a.hold(() => client.write(f));
              return;
            }
            relay.dropped.push(name);
            done();
            a.resolve();
            return;
          }
          client.write(f);
        },
        (rest) => client.write(rest),
      ),
    );
    client.on('close', done);
    upstream.on('close', done);
    client.on('error', done);
    upstream.on('error', done);
  });
  relay.dropReplyOnce = (name) => new Promise((resolve) => armed.push({ name, resolve }));
  /**
   * holdReplyOnce(name, match): the next reply to a `name` command whose body satisfies
   * match(body) is kept until release() is called. `arrived` resolves when the server has
   * answered (so it ran the command).
   */
  relay.holdReplyOnce = (name, match) => {
    let send = null;
    let released = false;
    let arrivedResolve;
    const arrived = new Promise((r) => (arrivedResolve = r));
    armed.push({
      name,
      match,
      hold: (write) => {
        send = write;
        if (released) write();
        arrivedResolve();
      },
    });
    return {
      arrived,
      release: () => {
        released = true;
        if (send) send();
      },
    };
  };
  /**
   * Network faults, until heal(): blackhole() forwards nothing in either direction, on the
   * connections open now and on new ones (accepted, never answered); reset() closes every
   * connection and closes new ones at once (a peer that refuses). heal() closes what was
   * blackholed (those streams lost bytes mid-frame) and forwards again.
   */
  relay.blackhole = () => {
    relay.mode = 'blackhole';
  };
  relay.reset = () => {
    relay.mode = 'reset';
    for (const s of sockets) s.destroy();
  };
  relay.heal = () => {
    const was = relay.mode;
    relay.mode = 'pass';
    if (was === 'blackhole') for (const s of [...sockets, ...swallowed]) s.destroy();
  };
  relay.close = () =>
    new Promise((r) => {
      for (const s of [...sockets, ...swallowed]) s.destroy();
      server.close(() => r());
    });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      relay.port = server.address().port;
      resolve(relay);
    });
  });
}

module.exports = { startRelay };
