import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import autocannon from 'autocannon';
import { loadConfig } from '../src/config.js';
import { createContainer, type Container } from '../src/container.js';
import { createLogger } from '../src/lib/logger.js';

export const POSTGRES_URL = process.env.CAREPATH_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface BenchStore {
  kind: 'sqlite' | 'postgres';
  databaseUrl: string;
  schema?: string;
  env: Record<string, string>;
  open(): Promise<Container>;
  drop(): Promise<void>;
}

/** A scratch store for one benchmark: a temp SQLite file or a new PostgreSQL schema. */
export async function benchStore(kind: 'sqlite' | 'postgres'): Promise<BenchStore> {
  if (kind === 'sqlite') {
    const databaseUrl = `sqlite:${join(mkdtempSync(join(tmpdir(), 'carepath-bench-')), 'bench.db')}`;
    return {
      kind,
      databaseUrl,
      env: { CAREPATH_DATABASE_URL: databaseUrl },
      open: () => createContainer(loadConfig({ CAREPATH_DATABASE_URL: databaseUrl }), { logger: createLogger('error') }),
      drop: async () => undefined,
    };
  }
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  return {
    kind,
    databaseUrl: POSTGRES_URL,
    schema,
    env: { CAREPATH_DATABASE_URL: POSTGRES_URL, BENCH_PG_SCHEMA: schema },
    open: () =>
      createContainer(loadConfig({ CAREPATH_DATABASE_URL: POSTGRES_URL }), {
        logger: createLogger('error'),
        storeOptions: { schema },
      }),
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`drop schema if exists ${schema} cascade`);
      await client.end();
    },
  };
}

export interface ServerProcess {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/** Starts a bench server script in its own process and waits for the port it prints. */
export async function startServer(script: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  // BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof") lets a profile be taken of the server under load.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
    lines.once('line', (line) => resolve(JSON.parse(line).port));
  });
  return {
    port,
    pid: child.pid!,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      }),
  };
}

/**
 * CPU time (ms) each thread of a process has used so far, by thread name, from /proc (Linux;
 * empty elsewhere). Two readings around a load give each thread's CPU per request, a figure
 * that holds up better than requests/s when something else shares the machine.
 */
export function threadCpuMs(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  const ticksPerMs = 100 / 1000; // USER_HZ
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))} ${tid}`;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = (Number(fields[11]) + Number(fields[12])) / ticksPerMs;
      byName.set(name, (byName.get(name) ?? 0) + ms);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return byName;
}

/** CPU time (ms) used so far by every process whose command name is `command` (e.g. postgres). */
export function commandCpuMs(command: string): number {
  let total = 0;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== command) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, and the children's (a backend that ended is counted by its parent)
      total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10;
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return total;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** autocannon against one URL; `body` may change per request through `setupRequest`. */
export async function load(options: autocannon.Options): Promise<LoadResult> {
  const result = await autocannon({ connections: 50, duration: 8, ...options });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/**
 * Measures `rounds` rounds alternating with a baseline (baseline first and last), divides each
 * round's rate by the mean of the baseline rounds either side of it, and answers the median
 * round: this machine's speed drifts by half within a minute, and one pair of measurements can
 * land on either side of the drift.
 */
export async function alternatingRounds<T>(
  rounds: number,
  baseline: () => Promise<number>,
  measured: () => Promise<T>,
  rateOf: (result: T) => number,
): Promise<{ ratios: number[]; result: T; baseline: number }> {
  const baselines = [await baseline()];
  const results: T[] = [];
  for (let round = 0; round < rounds; round++) {
    results.push(await measured());
    baselines.push(await baseline());
  }
  const ratios = results.map((result, i) => rateOf(result) / ((baselines[i] + baselines[i + 1]) / 2));
  const middle = ratios.indexOf([...ratios].sort((a, b) => a - b)[Math.floor(rounds / 2)]);
  return { ratios, result: results[middle], baseline: (baselines[middle] + baselines[middle + 1]) / 2 };
}
