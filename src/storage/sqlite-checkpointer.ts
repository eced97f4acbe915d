/**
 * Checkpoints a SQLite WAL from a worker thread, so that the thread serving requests seldom does
 * and then only briefly.
 *
 * Why: with SQLite's automatic checkpoint, the commit that pushes the WAL past 1,000 pages copies
 * them into the database file and fsyncs it inside that commit, while the event loop waits.
 * Under fire load the run writer's commits took a quarter of the server's time, about half of it
 * in checkpoints, and their fsyncs stall every request in flight (--cpu-prof, docs/decisions.md).
 * Here a second connection on its own thread runs PASSIVE checkpoints: they never block writers
 * or readers, and durability is unchanged (the WAL is fsynced before pages are copied back).
 *
 * The serving connection keeps an automatic checkpoint at a larger size. Under steady writes it
 * is what lets the WAL start over from its beginning (that needs a checkpoint ending exactly at
 * the last commit, and the next commit comes before this thread's fsyncs are done); as the thread
 * has already copied nearly every frame, it has little to copy and to fsync. It also bounds the
 * WAL should this thread fall behind or stop.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Pages the serving connection lets the WAL reach before checkpointing itself (about 100 MiB at
 * 4 KiB pages). Each of its checkpoints stalls the event loop for two fsyncs, so under a steady
 * stream of commits they should be rare: at 4,000 pages they came several times a second at
 * 4,000 fires/s and more than doubled the event loop's p99 delay (about 22 ms against 8–10 ms).
 */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 25_000;

const INTERVAL_MS = 100;
/** After a checkpoint that left frames behind (writes arrived meanwhile), the next one comes soon. */
const CHASE_MS = 5;

// Plain CommonJS run with `eval`, so it works the same under tsx, vitest and plain node.
// A checkpoint that did not reach the end of the WAL (commits arrived meanwhile) is soon
// followed by another, so the copied part stays close to the tail.
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
function checkpoint() {
  let wait = workerData.intervalMs;
  try {
    const [state] = db.pragma('wal_checkpoint(PASSIVE)');
    if (state && state.log > state.checkpointed) wait = workerData.chaseMs;
  } catch {
    // Busy or closing: try again later; the serving connection's fallback bounds the WAL.
  }
  setTimeout(checkpoint, wait);
}
setTimeout(checkpoint, workerData.intervalMs);
`;

export interface Checkpointer {
  stop(): Promise<void>;
}

export function startCheckpointer(file: string): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, intervalMs: INTERVAL_MS, chaseMs: CHASE_MS } });
  // Never keeps the process alive; an error in the thread only loses the offloading.
  worker.unref();
  worker.on('error', () => undefined);
  return {
    stop: async () => {
      await worker.terminate();
    },
  };
}
