// What an application does with Google's Node client (@google-cloud/datastore), against
// whatever DATASTORE_EMULATOR_HOST names: every answer checked exactly. Prints "ok" at the end.
//
//     DATASTORE_EMULATOR_HOST=127.0.0.1:8081 node node_app.js PROJECT

const assert = require('node:assert/strict');
const {Datastore, PropertyFilter, and, or} = require('@google-cloud/datastore');

const projectId = process.argv[2] || 'node-app';
const datastore = new Datastore({projectId});

async function main() {
  // Put and get.
  const key = datastore.key(['Task', 'write']);
  await datastore.save({
    key,
    data: [
      {name: 'title', value: 'Write the report'},
      {name: 'done', value: false},
      {name: 'priority', value: 4},
      {name: 'score', value: datastore.double(2.5)},
      {name: 'due', value: new Date('2024-05-17T12:30:01.250Z')},
      {name: 'tags', value: ['work', 'urgent']},
      {name: 'notes', value: 'x'.repeat(2000), excludeFromIndexes: true},
    ],
  });
  const [task] = await datastore.get(key);
  assert.equal(task.title, 'Write the report');
  assert.equal(task.done, false);
  assert.equal(task.priority, 4);
  assert.equal(task.score, 2.5);
  assert.equal(task.due.toISOString(), '2024-05-17T12:30:01.250Z');
  assert.deepEqual(task.tags, ['work', 'urgent']);
  assert.equal(task.notes.length, 2000);

  // Allocated ids, many at once.
  const [keys] = await datastore.allocateIds(datastore.key(['Task']), 20);
  assert.equal(new Set(keys.map(k => k.id)).size, 20);
  await datastore.save(
    keys.map((k, i) => ({
      key: k,
      data: {title: `task ${String(i).padStart(2, '0')}`, done: i % 2 === 0, priority: i % 5, n: i},
    })),
  );
  const [some] = await datastore.get(keys.slice(0, 5));
  assert.deepEqual(some.map(e => e.n).sort((a, b) => a - b), [0, 1, 2, 3, 4]);

  // Queries: filters, orders, limits, cursors, projections, keys only.
  const ns = q => q.map(e => e.n);
  let [rows] = await datastore
    .createQuery('Task')
    .filter(new PropertyFilter('done', '=', true))
    .order('n')
    .run();
  assert.deepEqual(ns(rows), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
  [rows] = await datastore
    .createQuery('Task')
    .filter(new PropertyFilter('n', '>=', 15))
    .order('n', {descending: true})
    .limit(3)
    .run();
  assert.deepEqual(ns(rows), [19, 18, 17]);
  [rows] = await datastore
    .createQuery('Task')
    .filter(or([new PropertyFilter('n', '=', 1), new PropertyFilter('n', '=', 19)]))
    .run();
  assert.deepEqual(ns(rows).sort((a, b) => a - b), [1, 19]);
  [rows] = await datastore
    .createQuery('Task')
    .filter(and([new PropertyFilter('n', '>', 2), new PropertyFilter('n', '<', 6)]))
    .run();
  assert.deepEqual(ns(rows).sort((a, b) => a - b), [3, 4, 5]);
  const seen = [];
  let cursor;
  for (;;) {
    let q = datastore.createQuery('Task').filter(new PropertyFilter('n', '>=', 0)).order('n').limit(7);
    if (cursor) q = q.start(cursor);
    const [page, info] = await q.run();
    seen.push(ns(page));
    if (info.moreResults === Datastore.NO_MORE_RESULTS || page.length < 7) break;
    cursor = info.endCursor;
  }
  assert.deepEqual(seen.flat(), [...Array(20).keys()]);
  [rows] = await datastore.createQuery('Task').select('__key__').run();
  assert.equal(rows.length, 21);
  [rows] = await datastore
    .createQuery('Task')
    .select('priority')
    .filter(new PropertyFilter('priority', '>', 3))
    .run();
  assert.ok(rows.length > 0 && rows.every(e => e.priority === 4 && e.n === undefined));

  // Aggregations.
  const [[counted]] = await datastore.runAggregationQuery(
    datastore.createAggregationQuery(datastore.createQuery('Task')).count('all'),
  );
  assert.equal(counted.all, 21);

  // A transaction, and one rolled back.
  const a = datastore.key(['Account', 'a']);
  const b = datastore.key(['Account', 'b']);
  await datastore.save([
    {key: a, data: {balance: 100}},
    {key: b, data: {balance: 0}},
  ]);
  const tx = datastore.transaction();
  await tx.run();
  const [[x, y]] = await tx.get([a, b]);
  x.balance -= 30;
  y.balance += 30;
  tx.save([
    {key: a, data: x},
    {key: b, data: y},
  ]);
  await tx.commit();
  const [[a1, b1]] = await datastore.get([a, b]);
  assert.deepEqual([a1.balance, b1.balance], [70, 30]);
  const failed = datastore.transaction();
  await failed.run();
  const [x2] = await failed.get(a);
  x2.balance = -1;
  failed.save({key: a, data: x2});
  await failed.rollback();
  const [a2] = await datastore.get(a);
  assert.equal(a2.balance, 70);

  // Deletes, namespaces.
  await datastore.delete(key);
  const [gone] = await datastore.get(key);
  assert.equal(gone, undefined);
  const other = datastore.key({namespace: 'other', path: ['Task', 'write']});
  await datastore.save({key: other, data: {title: 'elsewhere'}});
  const [elsewhere] = await datastore.get(other);
  assert.equal(elsewhere.title, 'elsewhere');
  const [still] = await datastore.get(key);
  assert.equal(still, undefined);

  console.log('ok');
}

main().catch(error => {
  console.error(error);
  process.exit(1);
});
