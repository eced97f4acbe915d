import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openMigratedStore } from '../../src/storage/migrate.js';
import { holdSqliteProcessLock } from '../../src/storage/sqlite-process-lock.js';
import { storeUnavailable, withoutPassword, StoreUnavailableError } from '../../src/storage/store-unavailable.js';
import { isConflictError, isStoreFullError, isTransientStoreError, loggableError } from '../../src/lib/store-errors.js';

describe('storeUnavailable', () => {
  it('turns a failure to reach or open the store into a sentence naming the store, never its password', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5999'), { code: 'ECONNREFUSED' });
    const error = storeUnavailable('postgres://carepath:s3cret-pw@127.0.0.1:5999/carepath', refused);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error!.message).toBe(
      'cannot open the store in CAREPATH_DATABASE_URL (postgres://carepath:***@127.0.0.1:5999/carepath): ' +
        'nothing listens there; is PostgreSQL running, on that host and port? [ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5999]',
    );
    expect(error!.message).not.toContain('s3cret');
  });

  it('knows PostgreSQL refusals and SQLite files that are no database', () => {
    const missing = Object.assign(new Error('database "cp" does not exist'), { code: '3D000' });
    expect(storeUnavailable('postgres://db.internal/cp', missing)!.message).toMatch(/the database does not exist; create it first \(createdb\) \[3D000: database "cp" does not exist\]$/);
    const notDb = Object.assign(new Error('file is not a database'), { code: 'SQLITE_NOTADB' });
    expect(storeUnavailable('sqlite:./data/carepath.db', notDb)!.message).toBe(
      'cannot open the store in CAREPATH_DATABASE_URL (sqlite:./data/carepath.db): the file is not a SQLite database [SQLITE_NOTADB: file is not a database]',
    );
  });

  it('refuses a SQLite file it may not write before opening it, naming the file (it used to fail after listening)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'carepath-ro-'));
    const file = join(dir, 'ro.db');
    const { store } = await openMigratedStore(`sqlite:${file}`);
    await store.close();
    // Immutable even for root, as a read-only mount would be; not every file system has it.
    let immutable = true;
    try {
      execFileSync('chattr', ['+i', file], { stdio: 'ignore' });
    } catch {
      immutable = false;
    }
    try {
      if (!immutable) {
        expect(storeUnavailable(`sqlite:${file}`, Object.assign(new Error(`EPERM: operation not permitted, access '${file}'`), { code: 'EPERM' }))!.message).toMatch(/immutable/);
        return;
      }
      await expect(openMigratedStore(`sqlite:${file}`)).rejects.toThrow(
        new RegExp(`^cannot open the store in CAREPATH_DATABASE_URL \\(sqlite:${file}\\): the SQLite file or its folder may not be written, even by root: is it immutable \\(lsattr; chattr -i\\)\\? \\[EPERM: `),
      );
    } finally {
      if (immutable) execFileSync('chattr', ['-i', file]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says so when the path to a SQLite file runs through a file, for the service\'s lock and for the store alike', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'carepath-path-'));
    try {
      writeFileSync(join(dir, 'plain-file'), 'not a folder');
      for (const url of [`sqlite:${join(dir, 'plain-file', 'x.db')}`, `sqlite:${join(dir, 'plain-file', 'a', 'x.db')}`]) {
        const sentence = /^cannot open the store in CAREPATH_DATABASE_URL \(sqlite:.*\): a part of the path to the SQLite file is a file, not a folder; choose another path \[(EEXIST|ENOTDIR)/;
        await expect(openMigratedStore(url)).rejects.toThrow(sentence);
        expect(() => holdSqliteProcessLock(url)).toThrow(StoreUnavailableError);
        expect(() => holdSqliteProcessLock(url)).toThrow(sentence);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('explains a connection that was cut or never answered, which node-postgres reports without a code', () => {
    const cut = storeUnavailable('postgres://u:pw@db.internal:5432/cp', new Error('Connection terminated unexpectedly'));
    expect(cut!.message).toBe(
      'cannot open the store in CAREPATH_DATABASE_URL (postgres://u:***@db.internal:5432/cp): the connection was closed before PostgreSQL answered; ' +
        'is it PostgreSQL on that port, and does a firewall or proxy cut it (or does the server want TLS: ?sslmode=require)? [Connection terminated unexpectedly]',
    );
    for (const words of ['timeout exceeded when trying to connect', 'Connection terminated due to connection timeout']) {
      expect(storeUnavailable('postgres://db.internal/cp', new Error(words))!.message).toMatch(/: no answer within 10 s; a firewall dropping packets, or the wrong host\? \[/);
    }
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(storeUnavailable('postgres://db.internal/cp', reset)!.message).toMatch(/: the connection was reset before PostgreSQL answered; .* \[ECONNRESET: read ECONNRESET\]$/);
    // The same words with a code, or among others, are someone else's failure.
    expect(storeUnavailable('postgres://db.internal/cp', Object.assign(new Error('Connection terminated unexpectedly'), { code: 'XX000' }))).toBeNull();
    expect(storeUnavailable('postgres://db.internal/cp', new Error('migration 0007: Connection terminated unexpectedly'))).toBeNull();
  });

  it('leaves every other failure to keep its own message', () => {
    expect(storeUnavailable('sqlite:x.db', new Error('a migration failed'))).toBeNull();
    expect(storeUnavailable('sqlite:x.db', Object.assign(new Error('unique'), { code: '23505' }))).toBeNull();
    expect(storeUnavailable('sqlite:x.db', 'not even an error')).toBeNull();
    expect(storeUnavailable('sqlite:x.db', Object.assign(new Error('odd'), { code: 'toString' }))).toBeNull();
  });

  it('shows a URL without its password, and a URL it cannot parse not at all', () => {
    expect(withoutPassword('postgresql://u:p@h:5432/d?sslmode=require')).toBe('postgresql://u:***@h:5432/d?sslmode=require');
    expect(withoutPassword('postgres://u@h/d')).toBe('postgres://u@h/d');
    expect(withoutPassword('postgres://h/d?user=u&password=s3cret&sslmode=require')).toBe('postgres://h/d?user=u&password=***&sslmode=require');
    expect(withoutPassword('postgres://u:p@[bad')).toBe('postgres://… (not a valid URL)');
    expect(withoutPassword('sqlite::memory:')).toBe('sqlite::memory:');
    // A password with #, / or ? written as is: no part of it may show.
    for (const password of ['p@ss#word', 'pa/ss', 'pa?ss=1', 'p#1@2#3']) {
      const shown = withoutPassword(`postgres://u:${password}@127.0.0.1:5432/x`);
      expect(shown, password).toBe('postgres://u:***@127.0.0.1:5432/x');
    }
  });
});

describe('isTransientStoreError', () => {
  const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

  it('knows a connection the database cut, none to be had, and SQLite busy past its timeout', () => {
    expect(isTransientStoreError(coded('terminating connection due to administrator command', '57P01'))).toBe(true);
    expect(isTransientStoreError(coded('the database system is shutting down', '57P03'))).toBe(true);
    expect(isTransientStoreError(coded('connection failure', '08006'))).toBe(true);
    expect(isTransientStoreError(coded('sorry, too many clients already', '53300'))).toBe(true);
    expect(isTransientStoreError(coded('read ECONNRESET', 'ECONNRESET'))).toBe(true);
    expect(isTransientStoreError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientStoreError(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isTransientStoreError(coded('database is locked', 'SQLITE_BUSY'))).toBe(true);
  });

  it('knows a transaction PostgreSQL rolled back for another (deadlock, serialization failure): tried again at once', () => {
    for (const code of ['40P01', '40001']) {
      expect(isTransientStoreError(coded('deadlock detected', code))).toBe(true);
      expect(isConflictError(coded('deadlock detected', code))).toBe(true);
    }
    expect(isConflictError(coded('terminating connection due to administrator command', '57P01'))).toBe(false);
    expect(isConflictError(coded('duplicate key value violates unique constraint "runs_pkey"', '23505'))).toBe(false);
    expect(isConflictError(null)).toBe(false);
  });

  it('leaves errors of the statement itself, and anything else, alone', () => {
    expect(isTransientStoreError(coded('duplicate key value violates unique constraint "runs_pkey"', '23505'))).toBe(false);
    expect(isTransientStoreError(coded('syntax error at or near "selec"', '42601'))).toBe(false);
    expect(isTransientStoreError(coded('UNIQUE constraint failed: runs.id', 'SQLITE_CONSTRAINT_PRIMARYKEY'))).toBe(false);
    expect(isTransientStoreError(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(false);
    expect(isTransientStoreError({ code: '57P01', message: 'not an Error' })).toBe(false);
    expect(isTransientStoreError(null)).toBe(false);
  });
});

describe('loggableError', () => {
  it('gives type and code always, and the words only of a store that did not answer', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(loggableError(refused)).toEqual({ type: 'Error', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' });
    // A driver's words may quote the data it choked on: they stay out of the log.
    const quoting = Object.assign(new Error('invalid input syntax for type uuid: "Patient/4711"'), { code: '22P02' });
    expect(loggableError(quoting)).toEqual({ type: 'Error', code: '22P02' });
    expect(loggableError(new SyntaxError('Unexpected token \'a\', "abc" is not valid JSON'))).toEqual({ type: 'SyntaxError' });
    expect(loggableError('a string')).toEqual({ type: 'string' });
  });

  it('keeps the words of a store with no room to write (they name a file), and tells it from one that did not answer', () => {
    const full = Object.assign(new Error('could not extend file "base/16384/2619": No space left on device'), { code: '53100' });
    expect(loggableError(full)).toEqual({ type: 'Error', code: '53100', message: 'could not extend file "base/16384/2619": No space left on device' });
    const sqliteFull = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    expect([isStoreFullError(full), isStoreFullError(sqliteFull), isTransientStoreError(full)]).toEqual([true, true, false]);
    expect(isStoreFullError(Object.assign(new Error('busy'), { code: 'SQLITE_BUSY' }))).toBe(false);
  });
});
