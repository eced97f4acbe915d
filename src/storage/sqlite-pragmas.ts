import type BetterSqlite3 from 'better-sqlite3';
import { FALLBACK_AUTOCHECKPOINT_PAGES } from './sqlite-checkpointer.js';

/**
 * The settings of the connection that serves a SQLite store (connect.ts), in one place.
 *
 * WAL lets readers go on while one writer commits; synchronous=NORMAL in WAL mode keeps the
 * database consistent on power loss and fsyncs at checkpoints (docs/decisions.md). A writer that
 * finds the write lock taken waits up to busy_timeout. Statement journals and temporary tables
 * stay in memory: an INSERT whose triggers write other tables opens a statement journal, which
 * would otherwise be a temporary file.
 */
export function configureSqliteConnection(connection: BetterSqlite3.Database): void {
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = NORMAL');
  connection.pragma('busy_timeout = 5000');
  connection.pragma('temp_store = memory');
  if (connection.memory) return;
  // Checkpoints run on their own thread (sqlite-checkpointer.ts); a writing connection
  // checkpoints only if the WAL grows well past SQLite's default, should that thread fall behind.
  connection.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
}
