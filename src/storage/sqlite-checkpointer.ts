/**
 * Checkpoints a SQLite WAL from a worker thread, so that the thread serving requests never copies
 * pages back itself, and lets the WAL start over from its beginning with a pause of the
 * serving connection's statements short enough not to show in request latency.
 *
 * Why a thread: with SQLite's automatic checkpoint, the commit that pushes the WAL past 1,000
 * pages copies them into the database file and fsyncs it inside that commit, while the event
 * loop waits. Here a second connection on its own thread runs PASSIVE checkpoints: they never
 * block writers or readers, and durability is unchanged (the WAL is fsynced before pages are
 * copied back).
 *
 * Why the handshake: the WAL only starts over when a checkpoint has copied every frame and no
 * commit came after it. Under a steady stream of commits a checkpoint on another thread never
 * ends at the last commit (commits arrive while it copies), so the WAL grew until the serving
 * connection's own fallback checkpoint ran at 25,000 pages, and that one stalled the event
 * loop for 20–50 ms (copying what had piled up since the thread's last checkpoint, and two
 * fsyncs) every second or two under load (docs/benchmarks.md). So once the WAL is past
 * `RESTART_AT_PAGES` and the thread has just caught up with all but the latest commits, it asks
 * the serving side for quiet: the serving side takes its connection's lock (asynchronously, the
 * event loop goes on), the thread copies the few frames left and answers, and the next commit
 * starts the WAL over. Nothing is blocked but the statements that wait for the lock, and only
 * for one small checkpoint.
 *
 * The serving connection keeps an automatic checkpoint at a much larger size: it bounds the WAL
 * should this thread fall behind, stop, or another process keep writing through the quiet.
 *
 * Why a truncation when idle: SQLite reuses a restarted WAL file instead of shrinking it, so
 * after a burst the file kept its size (up to `RESTART_AT_PAGES`, about 100 MiB) until the next
 * burst: disk an operator saw used by a service doing nothing. Once every frame is copied and no
 * commit has come for `TRUNCATE_IDLE_MS`, the thread truncates it (a TRUNCATE checkpoint with
 * nothing left to copy: the write lock for an instant, at a time nobody writes).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Pages the serving connection lets the WAL reach before checkpointing itself (about 240 MiB at
 * 4 KiB pages): only reached when the handshake below cannot restart the WAL.
 */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 60_000;

/**
 * WAL size (pages, about 100 MiB) from which the thread asks for quiet to restart the WAL. Each
 * quiet costs the serving side one small checkpoint (5–25 ms here, mostly its two fsyncs), so they
 * should be rare; 8,000 pages gave no better latency than 25,000 or 40,000 (docs/benchmarks.md).
 */
export const RESTART_AT_PAGES = 25_000;

const INTERVAL_MS = 100;
/** After a checkpoint that left frames behind (writes arrived meanwhile), the next one comes soon. */
const CHASE_MS = 5;
/**
 * Asks for quiet only after a checkpoint that copied at most this many frames: the quiet's own
 * checkpoint copies about as many (what was committed meanwhile). 100 gave a lower p99 than 300.
 */
const QUIET_FRAMES = 100;
/** Checkpoints back to back at most, should commits come too fast for one to find little to copy. */
const MAX_CATCH_UPS = 5;
/** How long the WAL must go without a commit, fully copied, before the thread truncates it. */
export const TRUNCATE_IDLE_MS = 10_000;
/** The longest the serving side stays quiet, should the thread not answer. */
const QUIET_LIMIT_MS = 1_000;

// Plain CommonJS run with `eval`, so it works the same under tsx, vitest and plain node.
const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
let onQuiet = null;
parentPort.on('message', (message) => {
  if (!onQuiet) return;
  const run = onQuiet;
  onQuiet = null;
  // 'quiet': the serving side holds its connection; 'resume': it could not, carry on without.
  if (message === 'quiet') run();
  else setTimeout(checkpoint, workerData.intervalMs);
});
function passive() {
  try {
    return db.pragma('wal_checkpoint(PASSIVE)')[0];
  } catch {
    // Busy or closing: try again later; the serving connection's fallback bounds the WAL.
    return undefined;
  }
}
let copiedBefore = 0;
let catchUps = 0;
let lastVersion = -1;
let unchangedSince = Date.now();
// An idle WAL whose frames are all copied is cut back to nothing (the file otherwise keeps its
// largest size). TRUNCATE waits for the write lock: only tried when nobody has written for a
// while. data_version changes with every commit of another connection (the WAL's frame count
// does not tell: a small commit after a restart leaves it where it was).
function truncateIfIdle(state) {
  const version = db.pragma('data_version', { simple: true });
  if (version !== lastVersion) {
    lastVersion = version;
    unchangedSince = Date.now();
    return;
  }
  if (state.log === 0 || state.checkpointed < state.log || Date.now() - unchangedSince < workerData.truncateIdleMs) return;
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
    copiedBefore = 0;
  } catch {
    // Busy: a writer came after all; the next idle stretch tries again.
  }
}
function checkpoint() {
  const state = passive();
  if (!state) return setTimeout(checkpoint, workerData.intervalMs);
  truncateIfIdle(state);
  const copied = state.checkpointed >= copiedBefore ? state.checkpointed - copiedBefore : state.checkpointed;
  copiedBefore = state.checkpointed;
  // Left frames behind (a reader's snapshot held them back): chase them soon.
  if (state.log > state.checkpointed) return setTimeout(checkpoint, workerData.chaseMs);
  if (state.log < workerData.restartAtPages) return setTimeout(checkpoint, workerData.intervalMs);
  // Big enough to start over. Commits went on while that checkpoint copied; catch up with them
  // at once until a checkpoint finds little to copy, so that the quiet is short.
  if (copied > workerData.quietFrames && catchUps++ < workerData.maxCatchUps) return setImmediate(checkpoint);
  catchUps = 0;
  onQuiet = () => {
    passive();
    copiedBefore = 0;
    parentPort.postMessage('done');
    setTimeout(checkpoint, workerData.intervalMs);
  };
  parentPort.postMessage('quiesce');
}
setTimeout(checkpoint, workerData.intervalMs);
`;

export interface Checkpointer {
  stop(): Promise<void>;
}

/**
 * Runs `quiet` while the serving connection runs nothing: the caller holds the connection's lock
 * around it (Kysely's `db.connection().execute`), never blocking the event loop.
 */
export type HoldConnection = (quiet: () => Promise<void>) => Promise<unknown>;

export interface CheckpointerOptions {
  restartAtPages?: number;
  truncateIdleMs?: number;
}

export function startCheckpointer(file: string, hold: HoldConnection, options: CheckpointerOptions = {}): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      driver,
      file,
      intervalMs: INTERVAL_MS,
      chaseMs: CHASE_MS,
      quietFrames: QUIET_FRAMES,
      maxCatchUps: MAX_CATCH_UPS,
      restartAtPages: options.restartAtPages ?? RESTART_AT_PAGES,
      truncateIdleMs: options.truncateIdleMs ?? TRUNCATE_IDLE_MS,
    },
  });
  // Never keeps the process alive; an error in the thread only loses the offloading.
  worker.unref();
  worker.on('error', () => undefined);
  let exited = false;
  worker.once('exit', () => {
    exited = true;
  });
  worker.on('message', (message) => {
    if (message !== 'quiesce' || exited) return;
    // Should the connection's lock fail (the store closing), the thread must not wait forever.
    void hold(() => quietWhileCheckpointing(worker)).catch(() => {
      if (!exited) worker.postMessage('resume');
    });
  });
  return {
    stop: async () => {
      await worker.terminate();
    },
  };
}

/** Tells the thread the connection is quiet and waits for its checkpoint (or its end, or a limit). */
function quietWhileCheckpointing(worker: Worker): Promise<void> {
  return new Promise((resolve) => {
    const finish = () => {
      clearTimeout(limit);
      worker.off('message', onMessage);
      worker.off('exit', finish);
      resolve();
    };
    const onMessage = (message: unknown) => {
      if (message === 'done') finish();
    };
    const limit = setTimeout(finish, QUIET_LIMIT_MS);
    worker.on('message', onMessage);
    worker.once('exit', finish);
    worker.postMessage('quiet');
  });
}
