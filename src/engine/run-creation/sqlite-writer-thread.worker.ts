/**
 * The run writer's thread (sqlite-writer-thread.ts starts it): its own connection to the store's
 * file, the run-writing statements prepared once, and one batch at a time from the serving
 * thread. Each answer goes back only after its transaction committed.
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { configureSqliteConnection } from '../../storage/sqlite-pragmas.js';
import { runRowWriter, type RunRow } from './sqlite-run-rows.js';
import type { WriterReply, WriterRequest } from './sqlite-writer-thread.js';

const connection = new BetterSqlite3((workerData as { file: string }).file);
configureSqliteConnection(connection);
const write = runRowWriter(connection);

parentPort!.on('message', ({ id, rows }: WriterRequest) => {
  let reply: WriterReply;
  try {
    reply = { id, outcomes: JSON.stringify(write(JSON.parse(rows) as RunRow[])) };
  } catch (error) {
    const { message, code } = error as { message?: string; code?: string };
    reply = { id, error: { message: message ?? String(error), code } };
  }
  parentPort!.postMessage(reply);
});
