/**
 * Engine worker processes for tests (test/helpers/engine-worker-process.ts, the worker `carepath
 * worker` runs, with a lease of the test's choosing): started on the test's store, stopped or
 * killed. Used by the crash tests and the run-action tests across processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { TestEnv } from './test-env.js';

export interface WorkerProcess {
  child: ChildProcess;
  /** What it printed, stdout and stderr, for a failure's message. */
  output: string[];
}

/** A worker process on `env`'s store (on PostgreSQL its schema), answered once it says it is ready. */
export async function spawnEngineWorker(env: TestEnv, id: string, leaseMs: number): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/engine-worker-process.ts'], {
    env: {
      ...process.env,
      CAREPATH_DATABASE_URL: env.container.config.databaseUrl,
      CAREPATH_HTTP_ALLOW: '127.0.0.1',
      ENGINE_PG_SCHEMA: env.kind === 'sqlite' ? '' : env.schema!,
      ENGINE_LEASE_MS: String(leaseMs),
      ENGINE_WORKER_ID: id,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output.push(chunk.toString());
      if (chunk.toString().includes('ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker ${id} exited (${code}) before it was ready: ${output.join('')}`)));
  });
  return { child, output };
}

/** Ends a worker process with `signal` (SIGKILL: a crash; SIGTERM: a stop) and waits for it to exit. */
export async function endEngineWorker(worker: WorkerProcess, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  const exited = once(worker.child, 'exit');
  worker.child.kill(signal);
  await exited;
}
