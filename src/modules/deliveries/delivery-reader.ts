/**
 * Reading delivery bodies off the serving thread. A body is parsed, shape-checked, validated
 * against the FHIR R4 schema and digested (ingestion/delivery-digest.ts) on a thread of its own
 * (delivery-reader-thread.ts); the serving thread gets the accepted count for its 202 or the
 * reason for its 400, then the digest for processing.
 *
 * Why: on the serving thread, parsing (about 8 µs a Synthea resource), validation (4 µs) and
 * their garbage were a third of ingestion's CPU there, and one thread is what limits a process
 * on SQLite (docs/benchmarks.md). The thread uses a second core; the serving thread receives a
 * few fields and one string per resource, which costs it far less than the parse would.
 *
 * The thread is started on the first body and answers bodies in the order they came. If it
 * dies, the bodies it held are read again on the serving thread (the same pure functions) and
 * the next body starts a new thread: a reader never loses a body, it only slows down. Nothing
 * here is durable: the intake stores every body before its 202, and a processor that finds no
 * digest in memory reads the stored body again.
 */
import { Worker } from 'node:worker_threads';
import { ApiError, invalidRequest } from '../../lib/errors.js';
import { createFhirValidator, type FhirValidator } from '../../ingestion/fhir-validate.js';
import { digestDelivery, readDeliveryBody, type DeliveryDigest } from '../../ingestion/delivery-digest.js';
import type { DeliveryItems } from '../../ingestion/delivery-body.js';

/** One body being read. */
export interface DeliveryRead {
  /** Items accepted by the shape check; rejects with `invalid_request` (400) when the shape is refused. */
  readonly shaped: Promise<number>;
  /** The digest for processing; rejects like `shaped`, or when the body could not be digested. */
  digest(): Promise<DeliveryDigest>;
}

export interface DeliveryReader {
  /**
   * Reads a body. `stored`: it was accepted before (a stored delivery read again), so plain
   * JSON.parse is enough; a refusal then means the stored row is damaged. `digest: false`: only
   * the shape is wanted (no processor here would take the digest), and `digest()` rejects.
   */
  read(body: string, options?: ReadOptions): DeliveryRead;
  /** Compiles the FHIR validation ahead of the first body; answers how long it took (ms). */
  warm(): Promise<number>;
  close(): Promise<void>;
}

export interface ReadOptions {
  stored?: boolean;
  digest?: boolean;
}

/** Messages to the thread; `more`: the next part of a digest sent in parts. */
export type ReaderRequest =
  | { id: number; kind: 'read'; body: string; stored: boolean; digest: boolean }
  | { id: number; kind: 'warm' }
  | { id: number; kind: 'more' };

/**
 * Items of a digest in one message at most. A message is copied onto the serving thread in one
 * go, outside JavaScript: the digest of 143,809 small resources (20 MiB) held it about 0.7 s. In
 * parts, each asked for once the one before is taken (`more`), no more than one part is copied
 * in one turn of the serving thread, about 10 ms.
 */
export const DIGEST_PART_ITEMS = 2000;

/**
 * Messages from the thread: per body `shaped` then `digested` (after `digest-part` messages, each
 * answered by `more`, for a digest of more than DIGEST_PART_ITEMS items), or `refused`, or `broken`.
 */
export type ReaderReply =
  | { id: number; kind: 'shaped'; accepted: number }
  | { id: number; kind: 'digest-part'; items: DeliveryDigest['items'] }
  | { id: number; kind: 'digested'; digest: DeliveryDigest }
  | { id: number; kind: 'refused'; message: string }
  | { id: number; kind: 'broken'; stage: 'shape' | 'digest'; name: string }
  | { id: number; kind: 'warmed'; ms: number };

const noop = () => {};

/** A promise with its settlers; rejections are marked handled (a digest nobody asks for may fail). */
function settleable<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(noop);
  return { promise, resolve, reject };
}

function brokenError(stage: 'shape' | 'digest', name: string): Error {
  return new Error(`the delivery body could not be ${stage === 'shape' ? 'read' : 'digested'} (${name})`);
}

const NOT_DIGESTED = Promise.reject(new Error('the delivery was read for its shape only'));
NOT_DIGESTED.catch(noop);

/**
 * Reads on the calling thread: shape at once, the digest (the FHIR checks) when first asked for.
 * What the thread falls back on, and a reader for one-off tools.
 */
export function inlineDeliveryReader(validatorOf: () => FhirValidator = memoValidator()): DeliveryReader {
  return {
    read(body, options = {}) {
      let parsed: DeliveryItems;
      try {
        parsed = readDeliveryBody(body, options.stored ?? false);
      } catch (error) {
        return refusedRead(error);
      }
      let digest: Promise<DeliveryDigest> | undefined;
      return {
        shaped: Promise.resolve(parsed.items.length),
        digest: () =>
          options.digest === false ? NOT_DIGESTED : (digest ??= new Promise((resolve) => resolve(digestDelivery(parsed, validatorOf())))),
      };
    },
    async warm() {
      return validatorOf().warm();
    },
    async close() {},
  };
}

/** A body whose shape was refused: its shape and its digest reject alike. */
function refusedRead(error: unknown): DeliveryRead {
  const refused = Promise.reject(error instanceof ApiError ? error : brokenError('shape', (error as Error)?.name ?? 'Error'));
  refused.catch(noop);
  return { shaped: refused, digest: () => refused as Promise<never> };
}

function memoValidator(): () => FhirValidator {
  let validator: FhirValidator | undefined;
  return () => (validator ??= createFhirValidator());
}

interface Job {
  body: string;
  options: ReadOptions;
  shaped: ReturnType<typeof settleable<number>>;
  digest: ReturnType<typeof settleable<DeliveryDigest>>;
  /** the shape answer came (so a fallback need not answer it again) */
  shapeSettled: boolean;
  /** items of a digest sent in parts, so far */
  items?: DeliveryDigest['items'][];
}

/**
 * The thread's module, started through tsx's loader (the service runs TypeScript; bin/carepath.js).
 * Both are named by absolute URL: the thread resolves bare names from the process's working
 * directory, which need not be the project's.
 */
const THREAD_MODULE = new URL('./delivery-reader-thread.ts', import.meta.url).href;
const TSX_API = import.meta.resolve('tsx/esm/api');
const bootstrap = (module: string) =>
  `import(${JSON.stringify(TSX_API)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(module)}); })`;

/** Threads lost one after the other without answering anything: then bodies are read here for good. */
const MAX_FAILED_STARTS = 3;

export class ThreadDeliveryReader implements DeliveryReader {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly jobs = new Map<number, Job>();
  private readonly warming = new Map<number, ReturnType<typeof settleable<number>>>();
  private readonly inline: DeliveryReader;
  private closed = false;
  /** Threads lost since one last answered. */
  private failedStarts = 0;

  /** `threadModule`: what the thread runs (tests name a module that fails to start). */
  constructor(
    private readonly onThreadLost: (error: unknown) => void = noop,
    fallbackValidator: () => FhirValidator = memoValidator(),
    private readonly threadModule: string = THREAD_MODULE,
  ) {
    this.inline = inlineDeliveryReader(fallbackValidator);
  }

  /** Whether bodies go to a thread (false once closed, or after threads kept failing to start). */
  get threaded(): boolean {
    return !this.closed && this.failedStarts < MAX_FAILED_STARTS;
  }

  read(body: string, options: ReadOptions = {}): DeliveryRead {
    if (!this.threaded) return this.inline.read(body, options);
    // While the thread compiles the FHIR validation (seconds, at a process's start), a body sent
    // to it would wait behind the compile for its shape, and its sender for the 202 (11 s on a
    // slow machine, past many senders' timeouts). Meanwhile the shape is read here; the thread
    // reads the body again for its digest once compiled.
    let shapedHere: number | undefined;
    if (this.warming.size > 0) {
      try {
        shapedHere = readDeliveryBody(body, options.stored ?? false).items.length;
      } catch (error) {
        return refusedRead(error);
      }
      if (options.digest === false) return { shaped: Promise.resolve(shapedHere), digest: () => NOT_DIGESTED };
    }
    const id = this.nextId++;
    const job: Job = { body, options, shaped: settleable<number>(), digest: settleable<DeliveryDigest>(), shapeSettled: false };
    if (shapedHere !== undefined) {
      job.shaped.resolve(shapedHere);
      job.shapeSettled = true;
    }
    this.jobs.set(id, job);
    // The text, not the bytes: the intake decodes them anyway (the text is what is stored), and a
    // string crosses to a thread as a plain copy.
    const message: ReaderRequest = { id, kind: 'read', body, stored: options.stored ?? false, digest: options.digest ?? true };
    this.thread().postMessage(message);
    this.updateRef();
    return { shaped: job.shaped.promise, digest: () => (options.digest === false ? NOT_DIGESTED : job.digest.promise) };
  }

  warm(): Promise<number> {
    if (!this.threaded) return Promise.resolve(0);
    const id = this.nextId++;
    const warmed = settleable<number>();
    this.warming.set(id, warmed);
    this.thread().postMessage({ id, kind: 'warm' } satisfies ReaderRequest);
    this.updateRef();
    return warmed.promise;
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
    // Whatever the thread still held is read here, so no caller waits forever.
    this.fallBack();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    // Not the parent's flags: the bootstrap registers tsx itself, and --cpu-prof and the like
    // belong to the serving thread.
    const worker = new Worker(bootstrap(this.threadModule), { eval: true, execArgv: [] });
    worker.on('message', (reply: ReaderReply) => this.answer(reply));
    worker.on('error', (error) => this.lost(worker, error));
    worker.on('exit', (code) => this.lost(worker, new Error(`the delivery reader thread exited (${code})`)));
    this.worker = worker;
    return worker;
  }

  private answer(reply: ReaderReply): void {
    this.failedStarts = 0;
    if (reply.kind === 'warmed') {
      this.warming.get(reply.id)?.resolve(reply.ms);
      this.warming.delete(reply.id);
      this.updateRef();
      return;
    }
    const job = this.jobs.get(reply.id);
    if (!job) return;
    switch (reply.kind) {
      case 'shaped':
        job.shapeSettled = true;
        job.shaped.resolve(reply.accepted);
        if (job.options.digest !== false) return;
        break;
      case 'digest-part':
        (job.items ??= []).push(reply.items);
        // Asked for once this turn is over: the next part is copied in a turn of its own.
        setImmediate(() => this.worker?.postMessage({ id: reply.id, kind: 'more' } satisfies ReaderRequest));
        return;
      case 'digested':
        job.digest.resolve(job.items ? { ...reply.digest, items: [...job.items, reply.digest.items].flat() } : reply.digest);
        break;
      case 'refused': {
        const error = invalidRequest(reply.message);
        job.shaped.reject(error);
        job.digest.reject(error);
        break;
      }
      case 'broken': {
        const error = brokenError(reply.stage, reply.name);
        if (!job.shapeSettled) job.shaped.reject(error);
        job.digest.reject(error);
        break;
      }
    }
    this.jobs.delete(reply.id);
    this.updateRef();
  }

  /** The thread died (or was stopped): its bodies are read here, and the next read starts a new one. */
  private lost(worker: Worker, error: unknown): void {
    if (this.worker !== worker) return;
    this.worker = null;
    this.failedStarts++;
    if (!this.closed) this.onThreadLost(error);
    this.fallBack();
  }

  private fallBack(): void {
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const job of jobs) {
      const read = this.inline.read(job.body, job.options);
      if (!job.shapeSettled) read.shaped.then(job.shaped.resolve, job.shaped.reject);
      read.digest().then(job.digest.resolve, job.digest.reject);
    }
    for (const warmed of this.warming.values()) warmed.resolve(0);
    this.warming.clear();
  }

  /** The thread keeps the process alive only while it holds work. */
  private updateRef(): void {
    if (!this.worker) return;
    if (this.jobs.size > 0 || this.warming.size > 0) this.worker.ref();
    else this.worker.unref();
  }
}
