'use strict';
// The unified test format's "Evaluating Matches" rules (mongodb/specifications,
// source/unified-test-format), plus the exact comparison used for `outcome`.
//
//  - Extra fields are allowed in root-level actual documents only.
//  - Arrays must have the same length; elements match pairwise.
//  - Numbers (int32, int64, double) match when numerically equal; Decimal128 by value.
//  - Special operators: $$exists, $$type, $$matchesEntity, $$matchesHexBytes,
//    $$unsetOrMatches, $$sessionLsid, $$lte, $$matchAsDocument, $$matchAsRoot.

const { EJSON } = require('./driver').BSON;

class MatchError extends Error {
  constructor(path, message) {
    super(`${path || '(root)'}: ${message}`);
    this.name = 'MatchError';
  }
}

function bsonType(v) {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (v && typeof v === 'object' && typeof v._bsontype === 'string') {
    switch (v._bsontype) {
      case 'Int32':
        return 'int';
      case 'Double':
        return 'double';
      case 'Long':
        return 'long';
      case 'Decimal128':
        return 'decimal';
      case 'ObjectId':
      case 'ObjectID':
        return 'objectId';
      case 'Binary':
        return 'binData';
      case 'Timestamp':
        return 'timestamp';
      case 'BSONRegExp':
        return 'regex';
      case 'Code':
        return v.scope ? 'javascriptWithScope' : 'javascript';
      case 'MinKey':
        return 'minKey';
      case 'MaxKey':
        return 'maxKey';
      case 'BSONSymbol':
        return 'symbol';
      case 'DBRef':
        return 'object';
      default:
        return v._bsontype;
    }
  }
  if (typeof v === 'number') return Number.isInteger(v) ? 'number-integral' : 'double';
  if (typeof v === 'bigint') return 'long';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  if (Array.isArray(v)) return 'array';
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return 'binData';
  if (typeof v === 'object') return 'object';
  return typeof v;
}

/** Type names accepted by $$type for an actual value (plain JS numbers lost their BSON type). */
function typeMatches(expectedName, actual) {
  const t = bsonType(actual);
  if (expectedName === 'number') return ['int', 'long', 'double', 'decimal', 'number-integral'].includes(t);
  if (t === 'number-integral') return ['int', 'long', 'double'].includes(expectedName);
  return t === expectedName;
}

function isNumeric(v) {
  const t = bsonType(v);
  return ['int', 'long', 'double', 'number-integral'].includes(t);
}

function toNumber(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v._bsontype === 'Long') return v.toNumber();
  if (v._bsontype === 'Int32' || v._bsontype === 'Double') return v.valueOf();
  throw new Error(`not a number: ${v}`);
}

function isDocument(v) {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v) || v instanceof Date || v instanceof RegExp || Buffer.isBuffer(v)) return false;
  if (typeof v._bsontype === 'string' && v._bsontype !== 'DBRef') return false;
  return true;
}

function specialOperator(v) {
  if (!isDocument(v)) return null;
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0].startsWith('$$')) return keys[0];
  return null;
}

function show(v) {
  try {
    return EJSON.stringify(v, { relaxed: true });
  } catch {
    return String(v);
  }
}

/** Scalar equality with flexible numerics. */
function scalarEqual(expected, actual) {
  if (isNumeric(expected) && isNumeric(actual)) return toNumber(expected) === toNumber(actual);
  const te = bsonType(expected);
  const ta = bsonType(actual);
  if (te !== ta) return false;
  switch (te) {
    case 'null':
    case 'undefined':
    case 'minKey':
    case 'maxKey':
      return true;
    case 'string':
    case 'bool':
      return expected === actual;
    case 'date':
      return expected.getTime() === actual.getTime();
    case 'objectId':
      return expected.equals(actual);
    case 'decimal':
      return expected.toString() === actual.toString();
    case 'binData': {
      const eb = Buffer.from(expected.buffer ?? expected);
      const ab = Buffer.from(actual.buffer ?? actual);
      return eb.equals(ab) && (expected.sub_type ?? 0) === (actual.sub_type ?? 0);
    }
    case 'timestamp':
      return expected.t === actual.t && expected.i === actual.i;
    case 'regex': {
      const ep = expected.pattern ?? expected.source;
      const ap = actual.pattern ?? actual.source;
      const eo = [...(expected.options ?? expected.flags ?? '')].sort().join('');
      const ao = [...(actual.options ?? actual.flags ?? '')].sort().join('');
      return ep === ap && eo === ao;
    }
    case 'javascript':
    case 'javascriptWithScope':
      return String(expected.code) === String(actual.code) && exactEqual(expected.scope ?? null, actual.scope ?? null);
    case 'symbol':
      return expected.value === actual.value;
    default:
      return show(expected) === show(actual);
  }
}

/**
 * match(expected, actual, opts): throws MatchError on mismatch.
 *  opts.root: actual is a root-level document (extra fields allowed).
 *  opts.entities: Map for $$matchesEntity / $$sessionLsid.
 */
function match(expected, actual, { root = false, entities = null, path = '' } = {}) {
  // The driver keeps some command fields (e.g. sort) as Maps; they are documents on the wire.
  if (actual instanceof Map) actual = Object.fromEntries(actual);
  const op = specialOperator(expected);
  if (op) return matchOperator(op, expected[op], actual, { root, entities, path, keyPresent: true });

  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) throw new MatchError(path, `expected an array, got ${show(actual)}`);
    if (actual.length !== expected.length) {
      throw new MatchError(path, `expected ${expected.length} elements, got ${actual.length}: ${show(actual)}`);
    }
    expected.forEach((e, i) => match(e, actual[i], { root: false, entities, path: `${path}[${i}]` }));
    return;
  }

  if (isDocument(expected)) {
    if (!isDocument(actual)) throw new MatchError(path, `expected a document, got ${show(actual)}`);
    for (const [k, ev] of Object.entries(expected)) {
      const p = path ? `${path}.${k}` : k;
      const kop = specialOperator(ev);
      const present = Object.prototype.hasOwnProperty.call(actual, k) && actual[k] !== undefined;
      if (kop) {
        matchOperator(kop, ev[kop], actual[k], { root: false, entities, path: p, keyPresent: present });
        continue;
      }
      if (!present) throw new MatchError(p, `missing; expected ${show(ev)}`);
      match(ev, actual[k], { root: false, entities, path: p });
    }
    if (!root) {
      const extra = Object.keys(actual).filter(
        (k) => actual[k] !== undefined && !Object.prototype.hasOwnProperty.call(expected, k),
      );
      if (extra.length) throw new MatchError(path, `unexpected extra field(s) ${extra.join(', ')} in ${show(actual)}`);
    }
    return;
  }

  if (!scalarEqual(expected, actual)) {
    throw new MatchError(path, `expected ${show(expected)} (${bsonType(expected)}), got ${show(actual)} (${bsonType(actual)})`);
  }
}

function getEntity(entities, name, path) {
  if (!entities || !entities.has(name)) throw new MatchError(path, `no entity named ${name}`);
  return entities.get(name);
}

function matchOperator(op, arg, actual, { root, entities, path, keyPresent }) {
  switch (op) {
    case '$$exists':
      if (arg && !keyPresent) throw new MatchError(path, 'expected to exist');
      if (!arg && keyPresent) throw new MatchError(path, `expected to be absent, got ${show(actual)}`);
      return;
    case '$$unsetOrMatches':
      if (!keyPresent || actual === undefined) return;
      return match(arg, actual, { root, entities, path });
    case '$$type': {
      if (!keyPresent || actual === undefined) throw new MatchError(path, `missing; expected type ${show(arg)}`);
      const names = Array.isArray(arg) ? arg : [arg];
      if (!names.some((n) => typeMatches(n, actual))) {
        throw new MatchError(path, `expected type ${names.join('|')}, got ${bsonType(actual)} ${show(actual)}`);
      }
      return;
    }
    case '$$matchesEntity':
      if (!keyPresent) throw new MatchError(path, 'missing');
      return match(getEntity(entities, arg, path), actual, { root, entities, path });
    case '$$matchesHexBytes': {
      if (!keyPresent) throw new MatchError(path, 'missing');
      const want = Buffer.from(arg, 'hex');
      const got = Buffer.isBuffer(actual) ? actual : Buffer.from(actual.buffer ?? actual);
      if (!want.equals(got)) throw new MatchError(path, `bytes differ: ${got.toString('hex')} != ${arg}`);
      return;
    }
    case '$$sessionLsid': {
      if (!keyPresent) throw new MatchError(path, 'missing lsid');
      const s = getEntity(entities, arg, path);
      const lsid = s.__lsid || s.id;
      if (!lsid) throw new MatchError(path, `session ${arg} has no lsid`);
      return match(lsid, actual, { root: false, entities, path });
    }
    case '$$lte':
      if (!keyPresent) throw new MatchError(path, 'missing');
      if (!isNumeric(actual) || !(toNumber(actual) <= toNumber(arg))) {
        throw new MatchError(path, `expected <= ${show(arg)}, got ${show(actual)}`);
      }
      return;
    case '$$matchAsDocument': {
      if (typeof actual !== 'string') throw new MatchError(path, `expected an extended JSON string, got ${show(actual)}`);
      return match(arg, EJSON.parse(actual, { relaxed: false }), { root: false, entities, path });
    }
    case '$$matchAsRoot':
      return match(arg, actual, { root: true, entities, path });
    default:
      throw new MatchError(path, `unsupported special operator ${op}`);
  }
}

/** Exact equality (no extra fields anywhere, key order free, numbers compared by value). */
function exactEqual(expected, actual) {
  if (actual instanceof Map) actual = Object.fromEntries(actual);
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => exactEqual(e, actual[i]));
  }
  if (isDocument(expected)) {
    if (!isDocument(actual)) return false;
    const ek = Object.keys(expected).filter((k) => expected[k] !== undefined);
    const ak = Object.keys(actual).filter((k) => actual[k] !== undefined);
    if (ek.length !== ak.length) return false;
    return ek.every((k) => Object.prototype.hasOwnProperty.call(actual, k) && exactEqual(expected[k], actual[k]));
  }
  return scalarEqual(expected, actual);
}

/** Int32/Double/Long wrappers (from canonical EJSON) as plain numbers; other values as is. */
function unwrapNumber(v) {
  if (v && typeof v === 'object' && ['Int32', 'Double', 'Long'].includes(v._bsontype)) return toNumber(v);
  return v;
}

module.exports = { unwrapNumber, match, exactEqual, MatchError, bsonType, show, isDocument, specialOperator };
