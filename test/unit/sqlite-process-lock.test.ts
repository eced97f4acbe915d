import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdSqliteProcessLock } from '../../src/storage/sqlite-process-lock.js';
import { StoreUnavailableError } from '../../src/storage/store-unavailable.js';

describe('the SQLite process lock', () => {
  const dir = mkdtempSync(join(tmpdir(), 'carepath-lock-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lets one holder have a database file, refuses a second with a sentence, and is free again once released', () => {
    const url = `sqlite:${join(dir, 'one', 'carepath.db')}`;
    const first = holdSqliteProcessLock(url)!;
    expect(first).not.toBeNull();
    let refusal: unknown;
    try {
      holdSqliteProcessLock(url);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(StoreUnavailableError);
    expect((refusal as Error).message).toBe(
      `the store in CAREPATH_DATABASE_URL (${url}) is in use by another carepath process; SQLite serves one process: stop the other one, or use PostgreSQL to run several (docs/operations.md)`,
    );
    first.release();
    const again = holdSqliteProcessLock(url)!;
    expect(again).not.toBeNull();
    again.release();
  });

  it('is one lock per file: a symbolic link to the file, or to its folder, finds it held', () => {
    mkdirSync(join(dir, 'real'));
    writeFileSync(join(dir, 'real', 'carepath.db'), '');
    symlinkSync(join(dir, 'real', 'carepath.db'), join(dir, 'link.db'));
    symlinkSync(join(dir, 'real'), join(dir, 'linked-folder'));
    const first = holdSqliteProcessLock(`sqlite:${join(dir, 'real', 'carepath.db')}`)!;
    expect(() => holdSqliteProcessLock(`sqlite:${join(dir, 'link.db')}`)).toThrow(StoreUnavailableError);
    expect(() => holdSqliteProcessLock(`sqlite:${join(dir, 'linked-folder', 'carepath.db')}`)).toThrow(StoreUnavailableError);
    first.release();
  });

  it('keeps database files apart, and takes no lock for PostgreSQL or memory stores', () => {
    const a = holdSqliteProcessLock(`sqlite:${join(dir, 'a.db')}`)!;
    const b = holdSqliteProcessLock(`sqlite:${join(dir, 'b.db')}`)!;
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    a.release();
    b.release();
    expect(holdSqliteProcessLock('sqlite::memory:')).toBeNull();
    expect(holdSqliteProcessLock('postgres://db.internal/carepath')).toBeNull();
  });
});
