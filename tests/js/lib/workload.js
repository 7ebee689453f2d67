'use strict';
// Seeded random CRUD workloads for differential testing: the same operation runs against a
// subject (the tiering proxy) and a reference (one plain store), and the two outcomes are
// compared field by field. Used by tests/js/tiering/differential.test.js.
//
// Documents: {_id: int, w: int (owning client), date, cat: 0..4, v: int, tag?: string},
// sometimes with $-prefixed and dotted field names.
// Dates are spread from long ago to a little in the future relative to the horizon, so
// some documents are older than the horizon (evicted, archive-only) and some younger
// (fast tier, warmed).

const { BSON } = require('mongodb');

const { EJSON } = BSON;

const CATS = 5;
const TAGS = ['a', 'b', 'c', 'd', 'e'];

/** A date relative to now: old, around the horizon, recent, or slightly in the future. */
function genDate(rng, nowMs, horizonMs) {
  const kind = rng.weighted([
    [25, 'old'],
    [30, 'edge'],
    [30, 'recent'],
    [15, 'future'],
  ]);
  switch (kind) {
    case 'old':
      return new Date(nowMs - rng.int(5 * horizonMs, 500 * horizonMs));
    case 'edge':
      return new Date(nowMs - rng.int(horizonMs / 2, 2 * horizonMs));
    case 'recent':
      return new Date(nowMs - rng.int(0, horizonMs / 2));
    default:
      return new Date(nowMs + rng.int(0, 2 * horizonMs));
  }
}

/** A lower bound for a date-range query: recent (fast-routable), old, or near the edge. */
function genBound(rng, nowMs, horizonMs, kind) {
  kind =
    kind ||
    rng.weighted([
      [40, 'recent'],
      [25, 'old'],
      [20, 'edge'],
      [15, 'future'],
    ]);
  switch (kind) {
    case 'recent':
      return new Date(nowMs - rng.int(0, horizonMs / 3));
    case 'old':
      return new Date(nowMs - rng.int(3 * horizonMs, 300 * horizonMs));
    case 'edge':
      return new Date(nowMs - rng.int((2 * horizonMs) / 3, (3 * horizonMs) / 2));
    default:
      return new Date(nowMs + rng.int(0, horizonMs));
  }
}

/**
 * Workload state for one client: its key range and the dates it has produced (for
 * equality/$in date queries).
 */
class WorkloadState {
  constructor({ rng, w = 0, keyBase = 0, keys = 300, horizonMs, scoped = false }) {
    this.rng = rng;
    this.w = w;
    this.keyBase = keyBase;
    this.keys = keys;
    this.horizonMs = horizonMs;
    this.scoped = scoped; // add {w} to every filter (concurrent clients on shared collections)
    this.dates = [];
  }

  key() {
    return this.keyBase + this.rng.int(0, this.keys - 1);
  }

  date() {
    const d = genDate(this.rng, Date.now(), this.horizonMs);
    this.dates.push(d);
    if (this.dates.length > 200) this.dates.shift();
    return d;
  }

  knownDate() {
    return this.dates.length ? this.rng.pick(this.dates) : this.date();
  }

  doc(id = this.key()) {
    const rng = this.rng;
    const d = { _id: id, w: this.w, date: this.date(), cat: rng.int(0, CATS - 1), v: rng.int(0, 1000) };
    if (rng.chance(0.6)) d.tag = rng.pick(TAGS);
    if (rng.chance(0.15)) d.m = { x: rng.int(0, 9), arr: [rng.int(0, 3), rng.int(0, 3)] };
    // Field names MongoDB 5.0+ stores but a replacement update may not carry: the feeder
    // must still copy such documents to the archive unchanged.
    if (rng.chance(0.05)) Object.assign(d, { $price: rng.int(0, 99), 'a.b': rng.int(0, 9), q: { $x: 1 } });
    return d;
  }

  /** A replacement body (no _id); rarely without an age field or with a non-date one. */
  replacement() {
    const rng = this.rng;
    const r = { w: this.w, cat: rng.int(0, CATS - 1), v: rng.int(0, 1000), replaced: true };
    const odd = rng.weighted([
      [92, 'date'],
      [4, 'none'],
      [2, 'null'],
      [2, 'string'],
    ]);
    if (odd === 'date') r.date = this.date();
    else if (odd === 'null') r.date = null;
    else if (odd === 'string') r.date = 'not a date';
    return r;
  }

  scope(filter) {
    return this.scoped ? { w: this.w, ...filter } : filter;
  }

  /** A filter on the age field: recent, old, spanning the horizon, closed ranges, equality. */
  dateFilter() {
    const rng = this.rng;
    const now = Date.now();
    const H = this.horizonMs;
    const shape = rng.weighted([
      [30, 'gte'],
      [10, 'gt'],
      [20, 'span'],
      [10, 'closedRecent'],
      [10, 'oldOnly'],
      [10, 'eq'],
      [10, 'in'],
    ]);
    switch (shape) {
      case 'gte':
        return { date: { $gte: genBound(rng, now, H) } };
      case 'gt':
        return { date: { $gt: genBound(rng, now, H) } };
      case 'span':
        return { date: { $gte: genBound(rng, now, H, 'old'), $lt: genBound(rng, now, H, rng.pick(['recent', 'future'])) } };
      case 'closedRecent': {
        const lo = genBound(rng, now, H, 'recent');
        return { date: { $gte: lo, $lte: new Date(lo.getTime() + rng.int(0, 2 * H)) } };
      }
      case 'oldOnly':
        return { date: { $lt: genBound(rng, now, H, rng.pick(['old', 'edge'])) } };
      case 'eq':
        return { date: this.knownDate() };
      default:
        return { date: { $in: [this.knownDate(), this.knownDate(), this.knownDate()] } };
    }
  }

  /** A filter without any date bound. */
  plainFilter() {
    const rng = this.rng;
    switch (rng.int(0, 4)) {
      case 0:
        return { cat: rng.int(0, CATS - 1) };
      case 1:
        return { v: { $gt: rng.int(500, 1000) } };
      case 2:
        return { tag: rng.pick(TAGS) };
      case 3:
        return { cat: rng.int(0, CATS - 1), v: { $lt: rng.int(0, 500) } };
      default:
        return {};
    }
  }

  anyFilter() {
    const rng = this.rng;
    const f = rng.weighted([
      [50, () => this.dateFilter()],
      [30, () => this.plainFilter()],
      [20, () => ({ ...this.dateFilter(), cat: rng.int(0, CATS - 1) })],
    ])();
    return this.scope(f);
  }

  /** A narrow filter for multi-document writes (about one category, often dated). */
  writeFilter() {
    const rng = this.rng;
    const base = { cat: rng.int(0, CATS - 1) };
    const f = rng.weighted([
      [40, () => ({ ...base, ...this.dateFilter() })],
      [30, () => ({ ...base, v: { $gt: rng.int(300, 1000) } })],
      [30, () => ({ ...base, tag: rng.pick(TAGS) })],
    ])();
    return this.scope(f);
  }

  update() {
    const rng = this.rng;
    return rng.weighted([
      [30, () => ({ $inc: { v: rng.int(1, 5) } })],
      [20, () => ({ $set: { v: rng.int(0, 1000), tag: rng.pick(TAGS) } })],
      [20, () => ({ $set: { date: this.date() } })],
      [10, () => ({ $unset: { tag: '' } })],
      [10, () => ({ $set: { 'm.x': rng.int(0, 9) }, $inc: { n: 1 } })],
      [10, () => ({ $set: { cat: rng.int(0, CATS - 1) }, $inc: { v: -1 } })],
      [3, () => ({ $set: { v: 'not a number' } })],
    ])();
  }

  idFilter() {
    return this.scope({ _id: this.key() });
  }

  /** The next operation: {name, args} (plain data, so it can be printed and replayed). */
  next() {
    const rng = this.rng;
    const op = rng.weighted([
      // writes
      [14, 'insertOne'],
      [3, 'insertMany'],
      [12, 'updateOneById'],
      [4, 'updateMany'],
      [4, 'replaceOne'],
      [5, 'deleteOne'],
      [1, 'deleteMany'],
      [5, 'findOneAndUpdate'],
      [3, 'findOneAndDelete'],
      // reads
      [10, 'findById'],
      [3, 'findByIds'],
      [14, 'findRange'],
      [5, 'findPlain'],
      [4, 'count'],
      [3, 'distinct'],
      [5, 'aggregate'],
    ]);
    switch (op) {
      case 'insertOne':
        return { name: op, doc: this.doc() };
      case 'insertMany': {
        const n = rng.int(2, 6);
        const docs = [];
        const seen = new Set();
        for (let i = 0; i < n; i++) {
          const d = this.doc();
          // Rarely a duplicate inside the batch; otherwise distinct ids.
          if (seen.has(d._id) && !rng.chance(0.2)) continue;
          seen.add(d._id);
          docs.push(d);
        }
        return { name: op, docs, ordered: rng.chance(0.7) };
      }
      case 'updateOneById':
        return { name: 'updateOne', filter: this.idFilter(), update: this.update(), upsert: rng.chance(0.25) };
      case 'updateMany':
        return { name: op, filter: this.writeFilter(), update: this.update(), upsert: false };
      case 'replaceOne':
        return { name: op, filter: this.idFilter(), replacement: this.replacement(), upsert: rng.chance(0.3) };
      case 'deleteOne':
        // By _id only: which document a filter-only deleteOne removes is unspecified.
        return { name: op, filter: this.idFilter() };
      case 'deleteMany':
        return { name: op, filter: { ...this.writeFilter(), v: { $gt: rng.int(700, 1000) } } };
      case 'findOneAndUpdate':
        return {
          name: op,
          filter: this.idFilter(),
          update: this.update(),
          returnDocument: rng.pick(['before', 'after']),
          upsert: rng.chance(0.2),
        };
      case 'findOneAndDelete':
        return { name: op, filter: this.idFilter() };
      case 'findById':
        return { name: 'find', filter: rng.chance(0.8) ? this.idFilter() : { ...this.idFilter(), cat: rng.int(0, CATS - 1) } };
      case 'findByIds':
        return { name: 'find', filter: this.scope({ _id: { $in: [this.key(), this.key(), this.key(), this.key()] } }) };
      case 'findRange': {
        const o = { name: 'find', filter: this.scope(this.dateFilter()) };
        const extra = rng.int(0, 5);
        if (extra === 1) o.projection = { v: 1, date: 1 };
        if (extra === 2) Object.assign(o, { sort: { date: -1, _id: 1 }, limit: rng.int(1, 10) });
        if (extra === 3) Object.assign(o, { sort: { _id: 1 }, skip: rng.int(0, 5), limit: rng.int(1, 20) });
        if (extra === 4) o.batchSize = rng.int(2, 7);
        return o;
      }
      case 'findPlain': {
        const o = { name: 'find', filter: this.scope(this.plainFilter()), batchSize: rng.chance(0.3) ? 5 : undefined };
        // With a limit, an archive-routed find is a merged read (CONSISTENCY.md, Merged reads).
        if (rng.chance(0.4)) Object.assign(o, { sort: { v: rng.pick([1, -1]), _id: 1 }, skip: rng.int(0, 3), limit: rng.int(1, 15) });
        if (rng.chance(0.2)) o.projection = { v: 1, cat: 1 };
        return o;
      }
      case 'count':
        return { name: 'countDocuments', filter: this.anyFilter() };
      case 'distinct':
        return { name: 'distinct', key: rng.pick(['cat', 'tag', 'v']), filter: this.anyFilter() };
      default: {
        const match = this.anyFilter();
        const tail = rng.weighted([
          [40, [{ $group: { _id: '$cat', n: { $sum: 1 }, s: { $sum: '$v' }, last: { $max: '$date' } } }]],
          [30, [{ $sort: { _id: 1 } }, { $limit: rng.int(1, 15) }]],
          [30, [{ $project: { cat: 1, vv: { $add: ['$v', 1] } } }]],
        ]);
        return { name: 'aggregate', pipeline: [{ $match: match }, ...tail] };
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Running an operation and normalising its outcome.

const byId = (a, b) => compareIds(a._id, b._id);

function compareIds(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const sa = EJSON.stringify(a);
  const sb = EJSON.stringify(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

function canonicalValue(v) {
  return EJSON.stringify(v, { relaxed: false });
}

function sortValues(values) {
  return [...values].sort((a, b) => {
    const sa = canonicalValue(a);
    const sb = canonicalValue(b);
    return sa < sb ? -1 : sa > sb ? 1 : 0;
  });
}

function errorOutcome(e) {
  const out = { error: true, code: e.code ?? null, name: e.name };
  if (e.name === 'MongoBulkWriteError') {
    out.insertedCount = e.insertedCount;
    const we = Array.isArray(e.writeErrors) ? e.writeErrors : e.writeErrors ? [e.writeErrors] : [];
    out.writeErrors = we.map((w) => ({ index: w.index, code: w.code }));
  }
  if (out.code === null && !e.writeErrors) out.message = e.message; // not a server error: keep the text
  return out;
}

/**
 * Runs `op` on `coll`; resolves to a normalised outcome (never rejects for server errors):
 * write counts, upserted ids, returned documents, read results sorted by _id where the
 * command leaves the order unspecified, or {error, code}.
 */
async function runOp(coll, op, session) {
  const so = session ? { session } : {};
  try {
    switch (op.name) {
      case 'insertOne': {
        const r = await coll.insertOne(op.doc, so);
        return { insertedId: r.insertedId };
      }
      case 'insertMany': {
        const r = await coll.insertMany(op.docs, { ordered: op.ordered, ...so });
        return { insertedCount: r.insertedCount };
      }
      case 'updateOne':
      case 'updateMany': {
        const r = await coll[op.name](op.filter, op.update, { upsert: op.upsert, ...so });
        return { matchedCount: r.matchedCount, modifiedCount: r.modifiedCount, upsertedCount: r.upsertedCount, upsertedId: r.upsertedId };
      }
      case 'replaceOne': {
        const r = await coll.replaceOne(op.filter, op.replacement, { upsert: op.upsert, ...so });
        return { matchedCount: r.matchedCount, modifiedCount: r.modifiedCount, upsertedCount: r.upsertedCount, upsertedId: r.upsertedId };
      }
      case 'deleteOne':
      case 'deleteMany': {
        const r = await coll[op.name](op.filter, so);
        return { deletedCount: r.deletedCount };
      }
      case 'findOneAndUpdate': {
        const value = await coll.findOneAndUpdate(op.filter, op.update, {
          returnDocument: op.returnDocument,
          upsert: op.upsert,
          ...so,
        });
        return { value };
      }
      case 'findOneAndDelete': {
        const value = await coll.findOneAndDelete(op.filter, so);
        return { value };
      }
      case 'find': {
        const opts = { ...so };
        for (const k of ['projection', 'sort', 'skip', 'limit', 'batchSize']) if (op[k] !== undefined) opts[k] = op[k];
        const docs = await coll.find(op.filter, opts).toArray();
        return { docs: op.sort ? docs : docs.sort(byId) };
      }
      case 'countDocuments':
        return { count: await coll.countDocuments(op.filter, so) };
      case 'distinct':
        return { values: sortValues(await coll.distinct(op.key, op.filter, so)) };
      case 'aggregate': {
        const docs = await coll.aggregate(op.pipeline, so).toArray();
        const sorted = op.pipeline.some((s) => s.$sort);
        return { docs: sorted ? docs : docs.sort(byId) };
      }
      default:
        throw new Error(`unknown op ${op.name}`);
    }
  } catch (e) {
    if (e && (e.code !== undefined || e.name === 'MongoBulkWriteError')) return errorOutcome(e);
    throw e;
  }
}

/** EJSON text of an op or outcome for messages (canonical, so types show). */
function describe(x) {
  return EJSON.stringify(x, { relaxed: true });
}

/**
 * Describes the difference between two normalised outcomes, or null when equal. Equality
 * is exact, field order included (one MongoDB would return the same order); a difference
 * in field order alone is named as such.
 */
function diffOutcome(got, want) {
  const a = EJSON.stringify(got, { relaxed: false });
  const b = EJSON.stringify(want, { relaxed: false });
  if (a === b) return null;
  const orderOnly = canonicalJson(got) === canonicalJson(want) ? ' (differs only in field order)' : '';
  if (Array.isArray(got.docs) && Array.isArray(want.docs)) {
    // Name the first differing position instead of printing whole result sets.
    const n = Math.max(got.docs.length, want.docs.length);
    for (let i = 0; i < n; i++) {
      const g = got.docs[i];
      const w = want.docs[i];
      if (g === undefined || w === undefined || EJSON.stringify(g, { relaxed: false }) !== EJSON.stringify(w, { relaxed: false })) {
        return (
          `subject${orderOnly} returned ${got.docs.length} documents, reference ${want.docs.length}; first difference at ` +
          `position ${i}:\n  subject:   ${brief(g)}\n  reference: ${brief(w)}`
        );
      }
    }
  }
  return `subject${orderOnly}: ${brief(got)}\nreference: ${brief(want)}`;
}

/** describe(), cut to `max` characters for failure messages. */
function brief(x, max = 3000) {
  if (x === undefined) return '(none)';
  const s = describe(x);
  return s.length > max ? `${s.slice(0, max)}... (${s.length} characters)` : s;
}

/** Canonical EJSON with object keys sorted (arrays keep their order). */
function canonicalJson(v) {
  const norm = (x) => {
    if (Array.isArray(x)) return x.map(norm);
    if (x && typeof x === 'object') {
      const out = {};
      for (const k of Object.keys(x).sort()) out[k] = norm(x[k]);
      return out;
    }
    return x;
  };
  return JSON.stringify(norm(EJSON.serialize(v, { relaxed: false })));
}

/** Differences between two document lists keyed by _id: [{_id, got, want}] (max `limit`). */
function diffDocs(got, want, limit = 10) {
  const g = new Map(got.map((d) => [canonicalValue(d._id), d]));
  const w = new Map(want.map((d) => [canonicalValue(d._id), d]));
  const out = [];
  for (const [k, d] of w) {
    const o = g.get(k);
    if (!o) out.push({ _id: d._id, got: 'missing', want: d });
    else if (EJSON.stringify(o, { relaxed: false }) !== EJSON.stringify(d, { relaxed: false })) out.push({ _id: d._id, got: o, want: d });
    if (out.length >= limit) return out;
  }
  for (const [k, d] of g) {
    if (!w.has(k)) out.push({ _id: d._id, got: d, want: 'absent' });
    if (out.length >= limit) return out;
  }
  return out;
}

module.exports = {
  WorkloadState,
  genDate,
  genBound,
  runOp,
  diffOutcome,
  diffDocs,
  describe,
  brief,
  canonicalJson,
  byId,
};
