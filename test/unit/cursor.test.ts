import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../src/lib/cursor.js';
import { ApiError } from '../../src/lib/errors.js';

const ID = '0190c0de-0000-7000-8000-000000000001';
const raw = (items: unknown[]) => Buffer.from(JSON.stringify(items), 'utf8').toString('base64url');
const refused = (cursor: string, list: string) => {
  try {
    decodeCursor(cursor, list);
  } catch (error) {
    return error instanceof ApiError && error.code === 'invalid_cursor';
  }
  return false;
};

describe('page cursors', () => {
  it('carry the last id and the list; another list refuses them', () => {
    expect(decodeCursor(encodeCursor(ID, 'runs'), 'runs')).toBe(ID);
    expect(refused(encodeCursor(ID, 'runs'), 'triggers')).toBe(true);
  });

  it("take the cursors of older versions (the id alone) and of newer ones (items after the list's name)", () => {
    expect(decodeCursor(raw([ID]), 'runs')).toBe(ID);
    expect(decodeCursor(raw([ID, 'runs', 'created_at', { more: true }]), 'runs')).toBe(ID);
    expect(refused(raw([ID, 'triggers', 'created_at']), 'runs')).toBe(true);
    expect(refused(raw(['zzz', 'runs']), 'runs')).toBe(true);
    expect(refused(raw([]), 'runs')).toBe(true);
  });
});
