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
  private queued: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly walPath: string,
    private readonly openFile: OpenForFlush = (path) => open(path, 'r'),
  ) {}

  /** Resolves once every transaction committed before the call is on disk. */
  sync(): Promise<void> {
    if (this.closed) return Promise.resolve();
    // A flush already running may have begun before the caller's commit: the next one serves it.
    // Whether that one succeeds or fails: its failure is not the caller's answer.
    if (this.running) {
      const next = () => {
        this.queued = null;
        return this.flush();
      };
      this.queued ??= this.running.then(next, next);
      return this.queued;
    }
    return this.flush();
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
