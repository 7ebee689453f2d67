'use strict';
// Entity operations of the unified test format, mapped onto the Node driver's API.
// Each handler: async (object, args, ctx) => result (converted to a plain value).
// An operation missing here makes its test SKIPPED with a reason, never passed.

const { SkipTest, readPreference, transactionOptions } = require('./entities');
const { unwrapNumber } = require('./match');

/** Results whose array elements are root-level documents (extra fields allowed). */
const ITERABLE_RESULTS = new Set([
  'find',
  'aggregate',
  'listIndexes',
  'listCollections',
  'listDatabases',
  'runCursorCommand',
  'iterateUntilDocumentOrError',
  'iterateOnce',
]);

function plainBulkResult(r) {
  if (!r) return r;
  return {
    deletedCount: r.deletedCount,
    insertedCount: r.insertedCount,
    insertedIds: { ...(r.insertedIds || {}) },
    matchedCount: r.matchedCount,
    modifiedCount: r.modifiedCount,
    upsertedCount: r.upsertedCount,
    upsertedIds: { ...(r.upsertedIds || {}) },
  };
}

function plainUpdateResult(r) {
  const out = { matchedCount: r.matchedCount, modifiedCount: r.modifiedCount, upsertedCount: r.upsertedCount };
  if (r.upsertedId !== null && r.upsertedId !== undefined) out.upsertedId = r.upsertedId;
  return out;
}

/**
 * Splits `args` into positional values (by name) and the remaining driver options.
 * Option values that are numbers become plain JS numbers: the driver checks
 * `typeof limit === 'number'` and friends. Documents stay typed.
 */
function take(args, names, ctx) {
  const rest = {};
  for (const [k, v] of Object.entries(args)) rest[k] = names.includes(k) ? v : unwrapNumber(v);
  const pos = names.map((n) => {
    const v = rest[n];
    delete rest[n];
    return v;
  });
  if (rest.session !== undefined) rest.session = ctx.entities.getTyped(rest.session, 'session');
  if (rest.readPreference) rest.readPreference = readPreference(rest.readPreference);
  if (rest.returnDocument) rest.returnDocument = String(rest.returnDocument).toLowerCase();
  return [pos, rest];
}

function bulkModels(requests) {
  return requests.map((req) => {
    const [kind, spec] = Object.entries(req)[0];
    if (!['insertOne', 'updateOne', 'updateMany', 'replaceOne', 'deleteOne', 'deleteMany'].includes(kind)) {
      throw new SkipTest(`bulkWrite model ${kind} not implemented`);
    }
    return { [kind]: { ...spec } };
  });
}

const collectionOps = {
  async aggregate(coll, args, ctx) {
    const [[pipeline], opts] = take(args, ['pipeline'], ctx);
    return coll.aggregate(pipeline, opts).toArray();
  },
  async bulkWrite(coll, args, ctx) {
    const [[requests], opts] = take(args, ['requests'], ctx);
    return plainBulkResult(await coll.bulkWrite(bulkModels(requests), opts));
  },
  async countDocuments(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return coll.countDocuments(filter, opts);
  },
  async count(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return coll.count(filter, opts);
  },
  async estimatedDocumentCount(coll, args, ctx) {
    const [, opts] = take(args, [], ctx);
    return coll.estimatedDocumentCount(opts);
  },
  async distinct(coll, args, ctx) {
    const [[field, filter], opts] = take(args, ['fieldName', 'filter'], ctx);
    return coll.distinct(field, filter, opts);
  },
  async find(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return coll.find(filter, opts).toArray();
  },
  async findOne(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return coll.findOne(filter, opts);
  },
  async createFindCursor(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    const cursor = coll.find(filter, opts);
    cursor.__kind = 'cursor';
    await cursor.hasNext(); // runs the find now, as the spec expects
    ctx.cursors.push(cursor);
    return cursor;
  },
  async findOneAndDelete(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return coll.findOneAndDelete(filter, opts);
  },
  async findOneAndReplace(coll, args, ctx) {
    const [[filter, replacement], opts] = take(args, ['filter', 'replacement'], ctx);
    return coll.findOneAndReplace(filter, replacement, opts);
  },
  async findOneAndUpdate(coll, args, ctx) {
    const [[filter, update], opts] = take(args, ['filter', 'update'], ctx);
    return coll.findOneAndUpdate(filter, update, opts);
  },
  async insertOne(coll, args, ctx) {
    const [[document], opts] = take(args, ['document'], ctx);
    const r = await coll.insertOne(document, opts);
    return { insertedId: r.insertedId };
  },
  async insertMany(coll, args, ctx) {
    const [[documents], opts] = take(args, ['documents'], ctx);
    const r = await coll.insertMany(documents, opts);
    return { insertedCount: r.insertedCount, insertedIds: { ...r.insertedIds } };
  },
  async deleteOne(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    const r = await coll.deleteOne(filter, opts);
    return { deletedCount: r.deletedCount };
  },
  async deleteMany(coll, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    const r = await coll.deleteMany(filter, opts);
    return { deletedCount: r.deletedCount };
  },
  async replaceOne(coll, args, ctx) {
    const [[filter, replacement], opts] = take(args, ['filter', 'replacement'], ctx);
    return plainUpdateResult(await coll.replaceOne(filter, replacement, opts));
  },
  async updateOne(coll, args, ctx) {
    const [[filter, update], opts] = take(args, ['filter', 'update'], ctx);
    return plainUpdateResult(await coll.updateOne(filter, update, opts));
  },
  async updateMany(coll, args, ctx) {
    const [[filter, update], opts] = take(args, ['filter', 'update'], ctx);
    return plainUpdateResult(await coll.updateMany(filter, update, opts));
  },
  async createIndex(coll, args, ctx) {
    const [[keys], opts] = take(args, ['keys'], ctx);
    return coll.createIndex(keys, opts);
  },
  async dropIndex(coll, args, ctx) {
    const [[name], opts] = take(args, ['name'], ctx);
    await coll.dropIndex(name, opts);
    return undefined;
  },
  async dropIndexes(coll, args, ctx) {
    const [, opts] = take(args, [], ctx);
    await coll.dropIndexes(opts);
    return undefined;
  },
  async listIndexes(coll, args, ctx) {
    const [, opts] = take(args, [], ctx);
    return coll.listIndexes(opts).toArray();
  },
  async rename(coll, args, ctx) {
    const [[to], opts] = take(args, ['to'], ctx);
    await coll.rename(to, opts);
    return undefined;
  },
  async createChangeStream(coll, args, ctx) {
    const [[pipeline], opts] = take(args, ['pipeline'], ctx);
    return openChangeStream(coll, pipeline, opts, ctx);
  },
};

async function openChangeStream(target, pipeline, opts, ctx) {
  const cs = target.watch(pipeline || [], opts);
  cs.__kind = 'changeStream';
  ctx.cursors.push(cs);
  // Make the driver send the aggregate now (the spec's createChangeStream is eager),
  // without a getMore: initialise the underlying cursor when the driver exposes it.
  if (cs.cursor && typeof cs.cursor.cursorInit === 'function') await cs.cursor.cursorInit();
  else await cs.tryNext();
  return cs;
}

const databaseOps = {
  async aggregate(db, args, ctx) {
    const [[pipeline], opts] = take(args, ['pipeline'], ctx);
    return db.aggregate(pipeline, opts).toArray();
  },
  async runCommand(db, args, ctx) {
    const [[command], opts] = take(args, ['command', 'commandName'], ctx);
    return db.command(command, opts);
  },
  async createCollection(db, args, ctx) {
    const [[name], opts] = take(args, ['collection'], ctx);
    await db.createCollection(name, opts);
    return undefined;
  },
  async dropCollection(db, args, ctx) {
    const [[name], opts] = take(args, ['collection'], ctx);
    await db.dropCollection(name, opts);
    return undefined;
  },
  async listCollections(db, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return db.listCollections(filter || {}, opts).toArray();
  },
  async listCollectionNames(db, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    return (await db.listCollections(filter || {}, { ...opts, nameOnly: true }).toArray()).map((c) => c.name);
  },
  async modifyCollection(db, args, ctx) {
    const [[name], opts] = take(args, ['collection'], ctx);
    const { session, ...fields } = opts;
    return db.command({ collMod: name, ...fields }, session ? { session } : {});
  },
  async createChangeStream(db, args, ctx) {
    const [[pipeline], opts] = take(args, ['pipeline'], ctx);
    return openChangeStream(db, pipeline, opts, ctx);
  },
};

const clientOps = {
  /** The client-level bulkWrite (MongoDB 8.0's bulkWrite command) through MongoClient.bulkWrite. */
  async clientBulkWrite(client, args, ctx) {
    const [[models], opts] = take(args, ['models'], ctx);
    const flat = models.map((m) => {
      const [name] = Object.keys(m);
      return { name, ...m[name] };
    });
    return client.bulkWrite(flat, opts);
  },
  async listDatabases(client, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    const r = await client.db('admin').admin().listDatabases({ ...opts, ...(filter ? { filter } : {}) });
    return r.databases;
  },
  async listDatabaseNames(client, args, ctx) {
    const [[filter], opts] = take(args, ['filter'], ctx);
    const r = await client.db('admin').admin().listDatabases({ ...opts, nameOnly: true, ...(filter ? { filter } : {}) });
    return r.databases.map((d) => d.name);
  },
  async createChangeStream(client, args, ctx) {
    const [[pipeline], opts] = take(args, ['pipeline'], ctx);
    return openChangeStream(client, pipeline, opts, ctx);
  },
};

const ITERATE_TIMEOUT_MS = 10_000;

const cursorOps = {
  async iterateUntilDocumentOrError(cursor) {
    const deadline = Date.now() + ITERATE_TIMEOUT_MS;
    for (;;) {
      const d = await cursor.tryNext();
      if (d !== null) return d;
      if (cursor.closed) throw new Error('cursor closed without a document');
      if (Date.now() > deadline) throw new Error(`no document within ${ITERATE_TIMEOUT_MS} ms`);
    }
  },
  async iterateOnce(cursor) {
    await cursor.tryNext();
    return undefined;
  },
  async close(cursor) {
    await cursor.close();
    return undefined;
  },
};

const sessionOps = {
  async endSession(session) {
    await session.endSession();
    return undefined;
  },
  async startTransaction(session, args) {
    session.startTransaction(transactionOptions(args));
    return undefined;
  },
  async commitTransaction(session) {
    await session.commitTransaction();
    return undefined;
  },
  async abortTransaction(session) {
    await session.abortTransaction();
    return undefined;
  },
};

const TABLES = {
  collection: collectionOps,
  database: databaseOps,
  client: clientOps,
  cursor: cursorOps,
  changeStream: cursorOps,
  session: sessionOps,
};

/** Handler for `name` on an entity of `kind`, or null when not implemented. */
function handlerFor(kind, name) {
  const t = TABLES[kind];
  return (t && Object.prototype.hasOwnProperty.call(t, name) && t[name]) || null;
}

/** All operation names the runner implements (any entity type). */
const IMPLEMENTED = new Set(Object.values(TABLES).flatMap((t) => Object.keys(t)));

module.exports = { handlerFor, IMPLEMENTED, ITERABLE_RESULTS, plainBulkResult };
