import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../src/lib/json-depth.js';

const nested = (depth: number, open = '{"a":', close = '}') => `${open.repeat(depth)}1${close.repeat(depth)}`;

describe('jsonNestsDeeperThan', () => {
  it('counts objects and arrays together, up to the limit and one past it', () => {
    expect(jsonNestsDeeperThan(nested(MAX_JSON_DEPTH))).toBe(false);
    expect(jsonNestsDeeperThan(nested(MAX_JSON_DEPTH + 1))).toBe(true);
    expect(jsonNestsDeeperThan(nested(MAX_JSON_DEPTH + 1, '[', ']'))).toBe(true);
    expect(jsonNestsDeeperThan(`{"a":[${nested(60)}, ${nested(60, '[', ']')}]}`)).toBe(false);
    expect(jsonNestsDeeperThan(`[${'[{"a":'.repeat(51)}1${'}]'.repeat(51)}]`)).toBe(true);
  });

  it('does not count brackets inside strings, escaped quotes included', () => {
    expect(jsonNestsDeeperThan(JSON.stringify({ text: '{'.repeat(500) }))).toBe(false);
    expect(jsonNestsDeeperThan(JSON.stringify({ text: `he said \\"${'['.repeat(500)}\\"` }))).toBe(false);
    expect(jsonNestsDeeperThan(JSON.stringify({ a: '\\', b: nested(MAX_JSON_DEPTH) }))).toBe(false);
  });

  it('takes a smaller limit', () => {
    expect(jsonNestsDeeperThan('{"a":{"b":[1]}}', 2)).toBe(true);
    expect(jsonNestsDeeperThan('{"a":{"b":1}}', 2)).toBe(false);
  });
});
