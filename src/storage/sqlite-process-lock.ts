/**
 * SQLite serves one `carepath` process (docs/operations.md): a second `serve`, `api` or `worker`
 * on the same file would keep its own rate-limit budgets and wake-ups, and one of the two would
 * be left waiting on the other's writes. Rather than find that out from odd behaviour at 2 a.m.,
 * a long-running command holds a lock beside the database file for its whole life, and a second
 * one is refused at start with a sentence saying why.
 *
 * The lock is SQLite's own: a tiny database `<file>.process-lock` opened in exclusive locking
 * mode and written once, so its file lock is held until the process ends; the operating system
 * lets go of it when the process dies, however it dies, so no stale lock is ever left behind.
 * `carepath migrate` and `carepath admin` take no lock: they are short and meant to run beside
 * the service.
 */
import { realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sqliteFileOf } from './connect.js';
import { StoreUnavailableError, storeUnavailable } from './store-unavailable.js';

export interface ProcessLock {
  release(): void;
}

/** The lock for a SQLite file store; null for PostgreSQL and in-memory stores. */
export function holdSqliteProcessLock(databaseUrl: string): ProcessLock | null {
  let file: string | null;
  let lock: BetterSqlite3.Database;
  try {
    // Makes the file's folder: a path through a file, or a folder nobody may write, fails here first.
    file = sqliteFileOf(databaseUrl);
    if (file === null) return null;
    lock = new BetterSqlite3(`${canonicalPath(file)}.process-lock`, { timeout: 0 });
  } catch (error) {
    throw storeUnavailable(databaseUrl, error) ?? error;
  }
  try {
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('create table if not exists holder (pid integer not null, started_at text not null); delete from holder');
    lock.prepare('insert into holder (pid, started_at) values (?, ?)').run(process.pid, new Date().toISOString());
  } catch (error) {
    lock.close();
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') {
      throw new StoreUnavailableError(
        `the store in CAREPATH_DATABASE_URL (${databaseUrl}) is in use by another carepath process; ` +
          'SQLite serves one process: stop the other one, or use PostgreSQL to run several (docs/operations.md)',
      );
    }
    throw error;
  }
  return { release: () => lock.close() };
}

/**
 * The database file's own path, links resolved: the lock must be one per file, not per name.
 * A second process that reached the same file through a symbolic link (or a linked folder) took
 * a lock of its own beside the link and ran alongside the first. A file not made yet is named
 * by its folder's real path.
 */
function canonicalPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    try {
      return join(realpathSync(dirname(file)), basename(file));
    } catch {
      return file;
    }
  }
}
