/**
 * The run writer's thread (sqlite-writer-thread.ts starts it): its own connection to the store's
 * file, the run-writing statements prepared once, and one batch at a time from the serving
 * thread. Each answer goes back only after its transaction committed.
 */
import { workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { answerThreadCalls } from '../../lib/thread-calls.js';
import { configureSqliteConnection } from '../../storage/sqlite-pragmas.js';
import { runRowWriter, type RunRow } from './sqlite-run-rows.js';

const connection = new BetterSqlite3((workerData as { file: string }).file);
configureSqliteConnection(connection);
const write = runRowWriter(connection);

answerThreadCalls((rows: string) => JSON.stringify(write(JSON.parse(rows) as RunRow[])));
