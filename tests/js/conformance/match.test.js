'use strict';
// Unit tests for the unified-format matcher and requirement checks (no server needed).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Long, ObjectId } = require('./driver');
const { EJSON } = require('./driver').BSON;
const { match, exactEqual, MatchError } = require('./match');
const { unmetRequirements, cmpVersion, unsupportedOperation } = require('./runner');

const ej = (s) => EJSON.parse(s, { relaxed: false });
const ok = (e, a, o) => assert.doesNotThrow(() => match(e, a, o));
const bad = (e, a, o) => assert.throws(() => match(e, a, o), MatchError);

test('root documents may have extra fields; nested may not', () => {
  ok({ x: 1 }, { x: 1, y: 2 }, { root: true });
  bad({ x: 1 }, { x: 1, y: 2 }, { root: false });
  bad({ x: { y: 1 } }, { x: { y: 1, z: 1 } }, { root: true });
  bad({ x: 1, y: 1 }, { x: 1 }, { root: true });
});

test('flexible numerics: int32, int64, double compare by value', () => {
  ok(ej('{"n": {"$numberLong": "5"}}'), { n: 5 }, { root: true });
  ok(ej('{"n": 1}'), { n: 1.0 }, { root: true });
  bad(ej('{"n": 1}'), { n: 1.5 }, { root: true });
  bad(ej('{"n": 1}'), { n: '1' }, { root: true });
  ok(ej('{"n": 3}'), { n: Long.fromNumber(3) }, { root: true });
});

test('arrays must have equal length; element documents are not root', () => {
  bad([1, 2, 3], [1, 2, 3, 4]);
  ok([{ a: 1 }], [{ a: 1 }]);
  bad([{ a: 1 }], [{ a: 1, b: 2 }]);
});

test('$$exists, $$unsetOrMatches, $$type, $$lte', () => {
  ok({ a: { $$exists: true } }, { a: null }, { root: true });
  bad({ a: { $$exists: true } }, {}, { root: true });
  ok({ a: { $$exists: false } }, {}, { root: true });
  bad({ a: { $$exists: false } }, { a: 1 }, { root: true });
  ok({ a: { $$unsetOrMatches: 1 } }, {}, { root: true });
  ok({ a: { $$unsetOrMatches: 1 } }, { a: 1 }, { root: true });
  bad({ a: { $$unsetOrMatches: 1 } }, { a: 2 }, { root: true });
  ok({ $$unsetOrMatches: { x: 1 } }, { x: 1, extra: true }, { root: true });
  ok({ a: { $$type: ['int', 'long'] } }, { a: 5 }, { root: true });
  ok({ a: { $$type: 'objectId' } }, { a: new ObjectId() }, { root: true });
  bad({ a: { $$type: 'string' } }, { a: 5 }, { root: true });
  bad({ a: { $$type: 'string' } }, {}, { root: true });
  ok({ a: { $$lte: 5 } }, { a: 4 }, { root: true });
  bad({ a: { $$lte: 5 } }, { a: 6 }, { root: true });
});

test('$$matchesEntity and $$sessionLsid use the entity map', () => {
  const entities = new Map([
    ['id0', 7],
    ['s0', { __lsid: { id: 'abc' } }],
  ]);
  ok({ _id: { $$matchesEntity: 'id0' } }, { _id: 7 }, { root: true, entities });
  bad({ _id: { $$matchesEntity: 'id0' } }, { _id: 8 }, { root: true, entities });
  ok({ lsid: { $$sessionLsid: 's0' } }, { lsid: { id: 'abc' } }, { root: true, entities });
  bad({ lsid: { $$sessionLsid: 's0' } }, { lsid: { id: 'zzz' } }, { root: true, entities });
});

test('exactEqual ignores key order but not extra fields', () => {
  assert.ok(exactEqual({ a: 1, b: { c: 2 } }, { b: { c: 2 }, a: 1 }));
  assert.ok(!exactEqual({ a: 1 }, { a: 1, b: 1 }));
  assert.ok(!exactEqual({ a: { c: 2 } }, { a: { c: 2, d: 3 } }));
  assert.ok(exactEqual(ej('{"a": {"$numberLong": "2"}}'), { a: 2 }));
});

test('requirements: versions, topologies, alternatives', () => {
  const server = { version: '7.0.4', topology: 'single', parameters: {} };
  assert.ok(cmpVersion('7.0.4', '7.0') > 0);
  assert.equal(unmetRequirements([{ minServerVersion: '4.2' }], server), null);
  assert.match(unmetRequirements([{ minServerVersion: '8.0' }], server), /8\.0/);
  assert.equal(unmetRequirements([{ maxServerVersion: '7.0.99' }], server), null);
  assert.match(unmetRequirements([{ maxServerVersion: '6.0.99' }], server), /<= 6\.0\.99/);
  assert.match(unmetRequirements([{ topologies: ['replicaset'] }], server), /topology/);
  assert.equal(unmetRequirements([{ topologies: ['replicaset'] }, { minServerVersion: '3.6' }], server), null);
  assert.match(unmetRequirements([{ serverless: 'require' }], server), /serverless/);
  assert.equal(unmetRequirements([{ serverless: 'forbid' }], server), null);
});

test('unsupported operations are reported for skipping', () => {
  assert.equal(unsupportedOperation([{ object: 'collection0', name: 'find' }]), null);
  assert.match(unsupportedOperation([{ object: 'collection0', name: 'mapReduce' }]), /mapReduce/);
  assert.match(unsupportedOperation([{ object: 'testRunner', name: 'loop' }]), /loop/);
});
