/**
 * Makes SQLite's committed transactions durable on power loss before an answer says they are
 * stored (a delivery's 202, a fire's 201), without blocking the event loop.
 *
 * Why: the store runs WAL with `synchronous = NORMAL` (docs/decisions.md): a commit is in the
 * WAL file, in the operating system's page cache, and survives the process being killed, but
 * not a power cut or a kernel crash until the next checkpoint syncs it. `FULL` would sync in
 * every commit, on the one connection's thread, holding every request for the disk's flush
 * (milliseconds on network storage). Instead, after a commit, `sync()` runs `fdatasync` on the
 * WAL file on libuv's thread pool; on Linux that flushes every page of the file, whichever
 * descriptor wrote it, so the commit's frames and its commit record are on disk when it
 * resolves, and recovery after a power cut finds the transaction. Callers that arrive while a
 * sync runs share the next one: one flush serves every commit made before it began.
 *
 * An idle sync starts its flush at the end of the event loop's turn, not at once: the answers of
 * one committed batch (a group commit of 20–40 fires) reach here one after the other in the same
 * turn, and a flush begun by the first made the others wait for the one after it: two flushes
 * for one commit (the fire benchmark: about 150 flushes a second of 21 answers each, against
 * about 85 of 38 since; docs/benchmarks.md).
 *
 * The WAL file keeps its inode while the store is open (a checkpoint that starts it over
 * rewrites it in place, a TRUNCATE checkpoint shortens it); frames a checkpoint already copied
 * are in the database file, which the checkpoint synced.
 */
import { open } from 'node:fs/promises';

/** What the sync needs of an open file (node:fs/promises' FileHandle; tests give their own). */
export interface FlushableFile {
  datasync(): Promise<void>;
  close(): Promise<void>;
}

export type OpenForFlush = (path: string) => Promise<FlushableFile>;

export class SqliteWalSync {
  private file: Promise<FlushableFile | null> | null = null;
  private running: Promise<void> | null = null;
  /**
   * The next flush, not begun yet, shared by every caller until it begins: after the running one
   * ends, or at the end of this turn of the event loop when none runs.
   */
  private next: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly walPath: string,
    private readonly openFile: OpenForFlush = (path) => open(path, 'r'),
  ) {}

  /** Resolves once every transaction committed before the call is on disk. */
  sync(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const begin = () => {
      this.next = null;
      return this.flush();
    };
    // A flush already running may have begun before the caller's commit: the next one serves it,
    // whether the running one succeeds or fails (its failure is not the caller's answer).
    this.next ??= this.running ? this.running.then(begin, begin) : new Promise<void>((resolve) => setImmediate(resolve)).then(begin);
    return this.next;
  }

  /** Flushes what was committed, then lets the file go (also when the flush failed: it throws). */
  async close(): Promise<void> {
    try {
      await this.sync();
    } finally {
      this.closed = true;
      const file = await this.file?.catch(() => null);
      await file?.close();
    }
  }

  private flush(): Promise<void> {
    const running = this.flushOnce().finally(() => {
      if (this.running === running) this.running = null;
    });
    this.running = running;
    return running;
  }

  private async flushOnce(): Promise<void> {
    // Opened on first use: the WAL file exists once the first transaction has committed. No WAL
    // (nothing committed through it yet) leaves nothing to flush.
    this.file ??= this.openFile(this.walPath).catch((error: NodeJS.ErrnoException) => {
      this.file = null; // opened again by the next flush
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    const file = await this.file;
    if (file !== null) await file.datasync();
  }
}
