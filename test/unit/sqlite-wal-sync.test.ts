import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteWalSync, type FlushableFile } from '../../src/storage/sqlite-wal-sync.js';

/** A WAL file whose flushes the test finishes one by one. */
function gatedFile() {
  const flushes: { done: () => void; fail: (error: Error) => void }[] = [];
  let closed = false;
  const file: FlushableFile = {
    datasync: () => new Promise<void>((resolve, reject) => flushes.push({ done: resolve, fail: reject })),
    close: async () => {
      closed = true;
    },
  };
  return { file, flushes, isClosed: () => closed };
}

const settled = async <T>(promise: Promise<T>) => {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
  return state;
};

describe('SqliteWalSync', () => {
  it('answers a caller only after a flush that began after its call; callers meanwhile share one more flush', async () => {
    const { file, flushes } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);

    const first = sync.sync();
    await settled(first);
    expect(flushes).toHaveLength(1);
    // These commits came while the first flush ran: it may have begun before them.
    const second = sync.sync();
    const third = sync.sync();
    expect(await settled(second)).toBe('pending');
    flushes[0].done();
    expect(await settled(first)).toBe('resolved');
    expect(await settled(second)).toBe('pending');
    expect(flushes).toHaveLength(2);
    flushes[1].done();
    expect(await settled(second)).toBe('resolved');
    expect(await settled(third)).toBe('resolved');
    expect(flushes).toHaveLength(2);

    // Idle again: the next caller starts a flush of its own.
    const fourth = sync.sync();
    await settled(fourth);
    expect(flushes).toHaveLength(3);
    flushes[2].done();
    expect(await settled(fourth)).toBe('resolved');
  });

  it('gives the callers of one turn of the event loop one flush (the answers of one committed batch)', async () => {
    const { file, flushes } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);
    // The answers of one batch come one after the other, each a few promise steps apart.
    const answers: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      answers.push(sync.sync());
      await Promise.resolve();
      await Promise.resolve();
    }
    await settled(answers[0]);
    expect(flushes).toHaveLength(1);
    flushes[0].done();
    for (const answer of answers) expect(await settled(answer)).toBe('resolved');
    expect(flushes).toHaveLength(1);
  });

  it('fails the callers of a flush that failed (the disk refused it), and flushes again for the next', async () => {
    const { file, flushes } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);
    const failed = sync.sync();
    await settled(failed);
    flushes[0].fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await expect(failed).rejects.toThrow('EIO');
    const next = sync.sync();
    await settled(next);
    expect(flushes).toHaveLength(2);
    flushes[1].done();
    await expect(next).resolves.toBeUndefined();
  });

  it('gives the callers that came during a failed flush a flush of their own, not its failure', async () => {
    const { file, flushes } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);
    const failing = sync.sync();
    await settled(failing);
    const during = sync.sync();
    flushes[0].fail(new Error('EIO: i/o error, fdatasync'));
    await expect(failing).rejects.toThrow('EIO');
    await settled(during);
    expect(flushes).toHaveLength(2);
    flushes[1].done();
    await expect(during).resolves.toBeUndefined();
  });

  it('opens the file again after an open that failed', async () => {
    const { file, flushes } = gatedFile();
    let opens = 0;
    const sync = new SqliteWalSync('/nowhere-wal', async () => {
      opens++;
      if (opens === 1) throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
      return file;
    });
    await expect(sync.sync()).rejects.toThrow('EMFILE');
    const next = sync.sync();
    await settled(next);
    flushes[0].done();
    await expect(next).resolves.toBeUndefined();
    expect(opens).toBe(2);
  });

  it('lets the file go when the flush at close fails, and says so', async () => {
    const { file, flushes, isClosed } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);
    const closing = sync.close();
    await settled(closing);
    flushes[0].fail(new Error('EIO: i/o error, fdatasync'));
    await expect(closing).rejects.toThrow('EIO');
    expect(isClosed()).toBe(true);
  });

  it('has nothing to flush before the WAL file exists, and opens it once it does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'carepath-wal-sync-'));
    const wal = join(dir, 'carepath.db-wal');
    const sync = new SqliteWalSync(wal);
    await expect(sync.sync()).resolves.toBeUndefined();
    writeFileSync(wal, 'frames');
    await expect(sync.sync()).resolves.toBeUndefined();
    await sync.close();
  });

  it('flushes what was committed before it closes, and then does nothing', async () => {
    const { file, flushes, isClosed } = gatedFile();
    const sync = new SqliteWalSync('/nowhere-wal', async () => file);
    const closing = sync.close();
    await settled(closing);
    expect(flushes).toHaveLength(1);
    expect(isClosed()).toBe(false);
    flushes[0].done();
    await closing;
    expect(isClosed()).toBe(true);
    await expect(sync.sync()).resolves.toBeUndefined();
    expect(flushes).toHaveLength(1);
  });
});
