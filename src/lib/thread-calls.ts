/**
 * Calls into a TypeScript module running on a worker thread: one request in, one answer out,
 * in order. The SQLite run writer (engine/run-creation) and the FHIR check thread
 * (modules/deliveries) use it to put work on the second core.
 *
 * - The thread starts with the first call (or `warm()`) and ends with `close()`.
 * - Idle, it does not keep the process alive; while a call waits, it does.
 * - Should it die, the calls in flight are rejected and the next call starts a new thread.
 * - An error thrown by the thread's handler rejects that call only, with the same message and
 *   `code` (a SQLite error code, say).
 *
 * Requests and answers cross by structured clone: send strings (JSON text) for anything large or
 * made of many objects; cloning object graphs element by element costs more than it saves.
 */
import { parentPort, Worker } from 'node:worker_threads';

type Envelope<T> = { id: number; body: T };
type Answer<T> = { id: number; body: T } | { id: number; error: { message: string; code?: string } };

// Plain CommonJS run with `eval` (as storage/sqlite-checkpointer.ts): it loads tsx in the thread,
// then the TypeScript entry, the same way under `carepath`, vitest and the benchmarks.
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx).then(({ register }) => {
  register();
  return import(workerData.entry);
});
`;

export class ThreadCalls<Request, Reply> {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();

  /**
   * @param entry the thread's module (it calls `answerThreadCalls`)
   * @param name what the thread is, for error messages ("run writer")
   * @param data handed to the module as `workerData`
   */
  constructor(
    private readonly entry: URL,
    private readonly name: string,
    private readonly data: Record<string, unknown> = {},
  ) {}

  call(request: Request): Promise<Reply> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ id, body: request } satisfies Envelope<Request>);
    });
  }

  /** Starts the thread now rather than with the first call (it takes a few hundred ms). */
  warm(): void {
    this.worker ??= this.start();
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
    this.failPending(new Error(`the ${this.name} thread was closed`));
  }

  private start(): Worker {
    const worker = new Worker(BOOTSTRAP, {
      eval: true,
      workerData: {
        ...this.data,
        // tsx's ESM entry: its CommonJS one cannot register hooks from an eval'd thread.
        tsx: import.meta.resolve('tsx/esm/api'),
        entry: this.entry.href,
      },
    });
    worker.on('message', (answer: Answer<Reply>) => {
      const waiter = this.pending.get(answer.id);
      if (!waiter) return;
      this.pending.delete(answer.id);
      if (this.pending.size === 0) worker.unref();
      if ('body' in answer) waiter.resolve(answer.body);
      else waiter.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }));
    });
    const lost = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failPending(error);
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the ${this.name} thread stopped (exit code ${code})`)));
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private failPending(error: Error): void {
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }
}

/** In the thread's module: answers every call with `handle`, one at a time, in order. */
export function answerThreadCalls<Request, Reply>(handle: (request: Request) => Reply): void {
  if (!parentPort) throw new Error('answerThreadCalls runs only on a worker thread');
  const port = parentPort;
  port.on('message', ({ id, body }: Envelope<Request>) => {
    let answer: Answer<Reply>;
    try {
      answer = { id, body: handle(body) };
    } catch (error) {
      const { message, code } = error as { message?: string; code?: string };
      answer = { id, error: { message: message ?? String(error), code } };
    }
    port.postMessage(answer);
  });
}
