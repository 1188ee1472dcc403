import assert from 'node:assert/strict';
import { test } from 'node:test';
import { positionalValues, toPositional } from './named-params.js';

test('named parameters become positions in order of first use; a repeated name keeps its position', () => {
  const cases = [
    { name: 'plain', sql: 'SELECT :a, :b', text: 'SELECT $1, $2', names: ['a', 'b'] },
    { name: 'repeated', sql: 'VALUES (:id, :now, :now)', text: 'VALUES ($1, $2, $2)', names: ['id', 'now'] },
    { name: 'cast left alone', sql: 'SELECT :x::bigint', text: 'SELECT $1::bigint', names: ['x'] },
    { name: 'none', sql: 'SELECT 1', text: 'SELECT 1', names: [] },
  ];
  for (const c of cases) assert.deepEqual(toPositional(c.sql), { text: c.text, names: c.names }, c.name);
});

test('values follow the positions, and a missing parameter is an error naming it', () => {
  const statement = toPositional('UPDATE t SET a = :a WHERE id = :id AND b = :a');
  assert.deepEqual(positionalValues(statement, { id: 'x', a: null, unused: 1 }), [null, 'x']);
  assert.throws(() => positionalValues(statement, { a: 1 }), /:id/);
});
