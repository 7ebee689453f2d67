'use strict';
// Document validation as mongod enforces it: validators with query operators and
// $jsonSchema, validationLevel strict/moderate/off, validationAction error/warn,
// bypassDocumentValidation, errInfo in mongod 5.0+'s shape, create/collMod/listCollections,
// and mongod's errors for validators it refuses. Node driver, plus one mongosh case.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { MongoBulkWriteError, MongoServerError } = require('mongodb');
const { useStore, expectServerError } = require('../lib/fixture');
const { mongoshJson } = require('../lib/mongosh');

const ctx = useStore({
  dbName: 'validation_test',
  storeOptions: { replSet: 'rs0' },
  uriParams: { replicaSet: 'rs0', directConnection: 'false' },
});

const orderSchema = {
  $jsonSchema: {
    bsonType: 'object',
    title: 'order',
    required: ['sku', 'qty'],
    properties: {
      sku: { bsonType: 'string', pattern: '^[A-Z]{3}-[0-9]+$', description: 'a SKU like ABC-1' },
      qty: { bsonType: 'int', minimum: 1, maximum: 100 },
      tags: { bsonType: 'array', items: { bsonType: 'string' }, uniqueItems: true, maxItems: 3 },
      status: { enum: ['new', 'paid', 'shipped'] },
    },
  },
};

async function created(options, prefix = 'v') {
  const name = ctx.collName(prefix);
  await ctx.db.createCollection(name, options);
  return ctx.db.collection(name);
}

async function options(coll) {
  const [info] = await ctx.db.listCollections({ name: coll.collectionName }).toArray();
  return info.options;
}

/** The one write error of a failed single-document write, checked to be 121. */
function validationError(err) {
  assert.ok(err instanceof MongoServerError, `a server error, got ${err}`);
  const e = err.writeErrors ? err.writeErrors[0] : err;
  assert.equal(e.code, 121, JSON.stringify(e));
  assert.equal(e.errmsg ?? e.message, 'Document failed validation');
  const info = e.errInfo ?? err.errInfo ?? err.errorResponse?.errInfo;
  assert.ok(info, `errInfo present: ${JSON.stringify(err)}`);
  return info;
}

async function rejects(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('the write was accepted');
}

// ---------------------------------------------------------------- create / listCollections

test('create stores the validator; listCollections shows it in options as given', async () => {
  const c = await created({ validator: orderSchema });
  assert.deepEqual(await options(c), { validator: orderSchema });
  const d = await created({ validator: { qty: { $gt: 0 } }, validationLevel: 'moderate', validationAction: 'warn' });
  assert.deepEqual(await options(d), {
    validator: { qty: { $gt: 0 } },
    validationLevel: 'moderate',
    validationAction: 'warn',
  });
});

// ---------------------------------------------------------------- $jsonSchema

test('$jsonSchema: valid documents are stored, invalid ones fail with 121 and errInfo', async () => {
  const c = await created({ validator: orderSchema });
  await c.insertOne({ _id: 1, sku: 'ABC-1', qty: 5, tags: ['a'], status: 'new' });
  const err = await rejects(c.insertOne({ _id: 2, sku: 'abc', qty: 0, tags: ['a', 'a'] }));
  const info = validationError(err);
  assert.equal(info.failingDocumentId, 2);
  assert.equal(info.details.operatorName, '$jsonSchema');
  assert.equal(info.details.title, 'order');
  const rules = info.details.schemaRulesNotSatisfied;
  const props = rules.find((r) => r.operatorName === 'properties');
  assert.ok(props, JSON.stringify(rules));
  const byName = Object.fromEntries(props.propertiesNotSatisfied.map((p) => [p.propertyName, p]));
  assert.deepEqual(Object.keys(byName).sort(), ['qty', 'sku', 'tags']);
  assert.equal(byName.sku.description, 'a SKU like ABC-1');
  assert.deepEqual(byName.sku.details, [
    {
      operatorName: 'pattern',
      specifiedAs: { pattern: '^[A-Z]{3}-[0-9]+$' },
      reason: 'regular expression did not match',
      consideredValue: 'abc',
    },
  ]);
  assert.deepEqual(byName.qty.details, [
    { operatorName: 'minimum', specifiedAs: { minimum: 1 }, reason: 'comparison failed', consideredValue: 0 },
  ]);
  assert.equal(byName.tags.details[0].operatorName, 'uniqueItems');
  assert.equal(byName.tags.details[0].duplicatedValue, 'a');
  assert.equal(await c.countDocuments({ _id: 2 }), 0, 'nothing stored');

  const missing = validationError(await rejects(c.insertOne({ _id: 3, qty: 1 })));
  assert.deepEqual(missing.details.schemaRulesNotSatisfied, [
    { operatorName: 'required', specifiedAs: { required: ['sku', 'qty'] }, missingProperties: ['sku'] },
  ]);
  const typed = validationError(await rejects(c.insertOne({ _id: 4, sku: 'ABC-2', qty: 2.5 })));
  assert.deepEqual(typed.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details, [
    {
      operatorName: 'bsonType',
      specifiedAs: { bsonType: 'int' },
      reason: 'type did not match',
      consideredValue: 2.5,
      consideredType: 'double',
    },
  ]);
  const enumErr = validationError(await rejects(c.insertOne({ _id: 5, sku: 'ABC-3', qty: 1, status: 'lost' })));
  assert.deepEqual(enumErr.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details[0].reason,
    'value was not found in enum');
});

test('$jsonSchema additionalProperties, nested objects, anyOf and dependencies', async () => {
  const c = await created({
    validator: {
      $jsonSchema: {
        properties: {
          _id: {},
          address: {
            bsonType: 'object',
            required: ['city'],
            properties: { city: { bsonType: 'string', minLength: 2 } },
          },
          contact: { anyOf: [{ bsonType: 'string' }, { bsonType: 'object', required: ['email'] }] },
          card: {},
          billing: {},
        },
        additionalProperties: false,
        dependencies: { card: ['billing'] },
      },
    },
  });
  await c.insertOne({ _id: 1, address: { city: 'Oslo' }, contact: 'x', card: 1, billing: 2 });
  const extra = validationError(await rejects(c.insertOne({ _id: 2, other: 1 })));
  assert.deepEqual(extra.details.schemaRulesNotSatisfied, [
    { operatorName: 'additionalProperties', specifiedAs: { additionalProperties: false }, additionalProperties: ['other'] },
  ]);
  const nested = validationError(await rejects(c.insertOne({ _id: 3, address: { city: 'X' } })));
  assert.deepEqual(nested.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0], {
    propertyName: 'address',
    details: [
      {
        operatorName: 'properties',
        propertiesNotSatisfied: [
          {
            propertyName: 'city',
            details: [
              {
                operatorName: 'minLength',
                specifiedAs: { minLength: 2 },
                reason: 'specified string length was not satisfied',
                consideredValue: 'X',
              },
            ],
          },
        ],
      },
    ],
  });
  const anyOf = validationError(await rejects(c.insertOne({ _id: 4, contact: {} })));
  const rule = anyOf.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details[0];
  assert.equal(rule.operatorName, 'anyOf');
  assert.deepEqual(rule.schemasNotSatisfied.map((s) => s.index), [0, 1]);
  const dep = validationError(await rejects(c.insertOne({ _id: 5, card: 1 })));
  assert.deepEqual(dep.details.schemaRulesNotSatisfied, [
    { operatorName: 'dependencies', failingDependencies: [{ conditionalProperty: 'card', missingProperties: ['billing'] }] },
  ]);
});

test('$jsonSchema also filters queries', async () => {
  const c = ctx.coll();
  await c.insertMany([{ _id: 1, a: 'x' }, { _id: 2, a: 5 }, { _id: 3 }]);
  const ids = (await c.find({ $jsonSchema: { required: ['a'], properties: { a: { bsonType: 'string' } } } }).toArray()).map(
    (d) => d._id,
  );
  assert.deepEqual(ids, [1]);
});

// ---------------------------------------------------------------- query-operator validators

test('query-operator validators report the failing clauses', async () => {
  const c = await created({ validator: { qty: { $gt: 0 }, status: { $in: ['A', 'B'] } } });
  await c.insertOne({ _id: 1, qty: 1, status: 'A' });
  const info = validationError(await rejects(c.insertOne({ _id: 2, qty: -1, status: 'A' })));
  assert.deepEqual(info, {
    failingDocumentId: 2,
    details: {
      operatorName: '$and',
      clausesNotSatisfied: [
        {
          index: 0,
          details: { operatorName: '$gt', specifiedAs: { qty: { $gt: 0 } }, reason: 'comparison failed', consideredValue: -1 },
        },
      ],
    },
  });
  const d = await created({
    validator: { $or: [{ phone: { $type: 'string' } }, { email: { $regex: /@example\.com$/ } }] },
  });
  const or = validationError(await rejects(d.insertOne({ _id: 1, phone: 5 })));
  assert.equal(or.details.operatorName, '$or');
  assert.deepEqual(or.details.clausesNotSatisfied[0].details, {
    operatorName: '$type',
    specifiedAs: { phone: { $type: 'string' } },
    reason: 'type did not match',
    consideredValue: 5,
    consideredType: 'int',
  });
  assert.deepEqual(or.details.clausesNotSatisfied[1].details.reason, 'field was missing');
  const e = await created({ validator: { $expr: { $lte: ['$spent', '$budget'] } } });
  await e.insertOne({ spent: 1, budget: 2 });
  const expr = validationError(await rejects(e.insertOne({ _id: 'over', spent: 3, budget: 2 })));
  assert.deepEqual(expr.details, {
    operatorName: '$expr',
    specifiedAs: { $expr: { $lte: ['$spent', '$budget'] } },
    reason: 'expression did not match',
    expressionResult: false,
  });
});

// ---------------------------------------------------------------- batches

test('ordered and unordered batches: validation failures are writeErrors entries', async () => {
  const c = await created({ validator: { n: { $type: 'int' } } });
  const docs = [{ _id: 1, n: 1 }, { _id: 2, n: 'x' }, { _id: 3, n: 3 }, { _id: 4, n: 'y' }];
  const ordered = await rejects(c.insertMany(docs));
  assert.ok(ordered instanceof MongoBulkWriteError);
  assert.equal(ordered.result.insertedCount, 1);
  assert.deepEqual(ordered.writeErrors.map((w) => [w.index, w.code]), [[1, 121]]);
  assert.equal(ordered.writeErrors[0].errInfo.failingDocumentId, 2);
  await c.deleteMany({});
  const unordered = await rejects(c.insertMany(docs, { ordered: false }));
  assert.equal(unordered.result.insertedCount, 2);
  assert.deepEqual(unordered.writeErrors.map((w) => [w.index, w.code]), [[1, 121], [3, 121]]);
  assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 3]);
});

// ---------------------------------------------------------------- updates

test('updates, replacements, upserts and findAndModify are validated', async () => {
  const c = await created({ validator: { qty: { $gte: 0 } } });
  await c.insertOne({ _id: 1, qty: 5 });
  const upd = await rejects(c.updateOne({ _id: 1 }, { $inc: { qty: -10 } }));
  assert.equal(validationError(upd).details.consideredValue, -5);
  await rejects(c.replaceOne({ _id: 1 }, { qty: -1 }));
  await rejects(c.updateOne({ _id: 9 }, { $set: { qty: -1 } }, { upsert: true }));
  await rejects(c.updateMany({}, [{ $set: { qty: { $subtract: ['$qty', 100] } } }]));
  const fam = await rejects(c.findOneAndUpdate({ _id: 1 }, { $set: { qty: -2 } }));
  assert.ok(!fam.writeErrors, 'findAndModify fails with a top-level error');
  const info = validationError(fam);
  assert.equal(info.failingDocumentId, 1);
  assert.deepEqual(await c.find().toArray(), [{ _id: 1, qty: 5 }], 'nothing changed');
  // Valid changes still go through.
  await c.updateOne({ _id: 1 }, { $inc: { qty: 1 } });
  await c.findOneAndUpdate({ _id: 2 }, { $set: { qty: 0 } }, { upsert: true });
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, qty: 6 }, { _id: 2, qty: 0 }]);
});

test('bypassDocumentValidation skips the checks on insert, update and findAndModify', async () => {
  const c = await created({ validator: { qty: { $gte: 0 } } });
  await c.insertOne({ _id: 1, qty: -1 }, { bypassDocumentValidation: true });
  await c.insertMany([{ _id: 2, qty: -2 }], { bypassDocumentValidation: true });
  await c.updateOne({ _id: 1 }, { $set: { qty: -3 } }, { bypassDocumentValidation: true });
  await c.findOneAndUpdate({ _id: 2 }, { $set: { qty: -4 } }, { bypassDocumentValidation: true });
  await c.updateOne({ _id: 3 }, { $set: { qty: -5 } }, { upsert: true, bypassDocumentValidation: true });
  assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d.qty), [-3, -4, -5]);
  // Without the flag the same writes fail.
  await rejects(c.insertOne({ _id: 4, qty: -1 }));
  await rejects(c.updateOne({ _id: 1 }, { $set: { qty: -6 } }));
});

// ---------------------------------------------------------------- levels and actions

test('validationLevel moderate skips documents that were already invalid; off checks nothing', async () => {
  const c = await created({ validator: { qty: { $gte: 0 } }, validationLevel: 'moderate' });
  await c.insertOne({ _id: 'bad', qty: -1 }, { bypassDocumentValidation: true });
  await c.insertOne({ _id: 'good', qty: 1 });
  await c.updateOne({ _id: 'bad' }, { $set: { qty: -2, note: 'still invalid' } });
  await rejects(c.updateOne({ _id: 'good' }, { $set: { qty: -1 } }));
  await rejects(c.insertOne({ _id: 'new', qty: -1 })); // inserts are always checked

  await ctx.db.command({ collMod: c.collectionName, validationLevel: 'off' });
  await c.insertOne({ _id: 'new', qty: -1 });
  await c.updateOne({ _id: 'good' }, { $set: { qty: -1 } });
  assert.equal(await c.countDocuments({ qty: { $lt: 0 } }), 3);
});

test('validationAction warn writes the document and logs id 20294', async () => {
  const c = await created({ validator: { qty: { $gte: 0 } }, validationAction: 'warn' });
  const logged = ctx.server.proc.waitForLine((line) => {
    if (!line.includes('"id":20294')) return undefined;
    const entry = JSON.parse(line);
    return entry.attr.namespace === `validation_test.${c.collectionName}` ? entry : undefined;
  }, 20_000);
  await c.insertOne({ _id: 1, qty: -1 });
  const entry = await logged;
  assert.equal(entry.msg, 'Document would fail validation');
  assert.equal(entry.s, 'W');
  assert.equal(entry.attr.errInfo.failingDocumentId, 1);
  assert.equal(entry.attr.errInfo.details.operatorName, '$gte');
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, qty: -1 });
});

// ---------------------------------------------------------------- collMod

test('collMod changes and removes the validator; listCollections follows', async () => {
  const c = await created({ validator: { a: { $exists: true } } });
  await rejects(c.insertOne({ b: 1 }));
  await ctx.db.command({ collMod: c.collectionName, validator: { b: { $exists: true } }, validationAction: 'error' });
  assert.deepEqual(await options(c), { validator: { b: { $exists: true } }, validationAction: 'error' });
  await c.insertOne({ b: 1 });
  await rejects(c.insertOne({ a: 1 }));
  await ctx.db.command({ collMod: c.collectionName, validator: {} });
  assert.deepEqual((await options(c)).validator, {});
  await c.insertOne({ a: 1 });
  // A validator added to an existing collection applies from then on.
  const plain = ctx.coll();
  await plain.insertOne({ x: 1 });
  await ctx.db.command({ collMod: plain.collectionName, validator: { x: { $type: 'int' } } });
  await rejects(plain.insertOne({ x: 'no' }));
});

test('invalid validators and options are refused with mongod codes', async () => {
  const name = () => ctx.collName('bad');
  const create = (opts) => ctx.db.command({ create: name(), ...opts });
  await expectServerError(create({ validator: { $where: 'this.a' } }), 2, 'BadValue');
  await expectServerError(create({ validator: { a: { $foo: 1 } } }), 2, 'BadValue');
  await expectServerError(create({ validator: { loc: { $near: [0, 0] } } }), 2, 'BadValue');
  await expectServerError(create({ validator: { a: { $elemMatch: { $expr: { $eq: [1, 1] } } } } }), 2);
  const ref = await expectServerError(create({ validator: { $jsonSchema: { properties: { a: { $ref: '#/x' } } } } }), 9);
  assert.match(ref.message, /\$jsonSchema keyword '\$ref' is not currently supported/);
  const fmt = await expectServerError(create({ validator: { $jsonSchema: { properties: { e: { format: 'email' } } } } }), 9);
  assert.match(fmt.message, /'format' is not currently supported/);
  await expectServerError(create({ validator: { $jsonSchema: { bsonType: 'objec' } } }), 2);
  await expectServerError(create({ validator: 5 }), 14, 'TypeMismatch');
  const lvl = await expectServerError(create({ validationLevel: 'sometimes' }), 2, 'BadValue');
  assert.match(lvl.message, /Enumeration value 'sometimes' for field 'create.validationLevel' is not a valid value/);
  await expectServerError(create({ validationAction: 'ignore' }), 2, 'BadValue');
  await expectServerError(ctx.db.command({ create: 'system.thing', validator: { a: 1 } }), 72, 'InvalidOptions');
  await expectServerError(ctx.client.db('admin').command({ create: name(), validator: { a: 1 } }), 72);
  // Nothing was created by the refused commands.
  const names = (await ctx.db.listCollections({ name: /^bad_/ }).toArray()).map((c) => c.name);
  assert.deepEqual(names, []);

  const c = await created({ validator: { a: 1 } });
  await expectServerError(ctx.db.command({ collMod: c.collectionName, validator: { $where: 'x' } }), 2);
  await expectServerError(ctx.db.command({ collMod: c.collectionName, validationAction: 'maybe' }), 2);
  await expectServerError(ctx.db.command({ collMod: 'no_such_coll', validator: { a: 1 } }), 26);
  assert.deepEqual(await options(c), { validator: { a: 1 } }, 'a refused collMod changes nothing');
});

// ---------------------------------------------------------------- transactions

test('validation applies inside transactions; the failure aborts the transaction', async () => {
  const c = await created({ validator: { qty: { $gte: 0 } } });
  const session = ctx.client.startSession();
  try {
    session.startTransaction();
    await c.insertOne({ _id: 1, qty: 1 }, { session });
    const err = await rejects(c.insertOne({ _id: 2, qty: -1 }, { session }));
    assert.equal(validationError(err).failingDocumentId, 2);
    const after = await rejects(c.insertOne({ _id: 3, qty: 3 }, { session }));
    assert.equal(after.codeName, 'NoSuchTransaction', 'the transaction was aborted');
    await session.abortTransaction().catch(() => {});
  } finally {
    await session.endSession();
  }
  assert.equal(await c.countDocuments(), 0, 'nothing of the transaction was written');

  const s2 = ctx.client.startSession();
  try {
    await s2.withTransaction(async () => {
      await c.insertOne({ _id: 10, qty: 1 }, { session: s2 });
      await c.updateOne({ _id: 10 }, { $set: { qty: 2 } }, { session: s2, bypassDocumentValidation: false });
    });
  } finally {
    await s2.endSession();
  }
  assert.deepEqual(await c.find().toArray(), [{ _id: 10, qty: 2 }]);
});

// ---------------------------------------------------------------- mongosh

test('mongosh: createCollection with a validator and the error it shows', async () => {
  const name = ctx.collName('sh');
  const out = await mongoshJson(
    ctx.server.uri(),
    `const d = db.getSiblingDB('validation_test');
     d.createCollection('${name}', {validator: {$jsonSchema: {required: ['a']}}});
     let err = null;
     try { d.getCollection('${name}').insertOne({b: 1}); } catch (e) { err = e; }
     print(JSON.stringify({code: err && err.code, errInfo: err && err.errInfo,
       options: d.getCollectionInfos({name: '${name}'})[0].options}));`,
  );
  assert.equal(out.code, 121);
  assert.deepEqual(out.errInfo.details.schemaRulesNotSatisfied, [
    { operatorName: 'required', specifiedAs: { required: ['a'] }, missingProperties: ['a'] },
  ]);
  assert.deepEqual(out.options, { validator: { $jsonSchema: { required: ['a'] } } });
});
