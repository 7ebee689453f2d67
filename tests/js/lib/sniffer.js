'use strict';
// A TCP relay between a client and a server that records the header of every wire frame in
// both directions (opCode, and for OP_COMPRESSED the original opcode and compressor id).
// Bytes are forwarded untouched. Used to prove that compression was really negotiated.

const net = require('node:net');

const COMPRESSOR_NAMES = { 0: 'noop', 1: 'snappy', 2: 'zlib', 3: 'zstd' };

function frameParser(dir, frames) {
  let buf = Buffer.alloc(0);
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 16) {
      const len = buf.readInt32LE(0);
      if (len < 16) return; // not a frame stream we understand; keep forwarding
      if (buf.length < len) return;
      const opCode = buf.readInt32LE(12);
      const f = { dir, opCode, length: len };
      if (opCode === 2012 && len >= 25) {
        f.originalOpcode = buf.readInt32LE(16);
        f.compressor = COMPRESSOR_NAMES[buf.readUInt8(24)] || `id${buf.readUInt8(24)}`;
      }
      frames.push(f);
      buf = buf.subarray(len);
    }
  };
}

/** Starts a relay to 127.0.0.1:targetPort. Resolves {port, frames, close()}. */
function startSniffer(targetPort) {
  const frames = [];
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect({ port: targetPort, host: '127.0.0.1' });
    sockets.add(client);
    sockets.add(upstream);
    const c2s = frameParser('c2s', frames);
    const s2c = frameParser('s2c', frames);
    client.on('data', (d) => {
      c2s(d);
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      s2c(d);
      client.write(d);
    });
    const done = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', done);
    upstream.on('close', done);
    client.on('error', done);
    upstream.on('error', done);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolve({
        port: server.address().port,
        frames,
        close: () =>
          new Promise((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}

module.exports = { startSniffer };
