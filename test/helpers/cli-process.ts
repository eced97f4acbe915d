/**
 * The `carepath` command as an operator runs it, for tests: real processes started from
 * `bin/carepath.js`, their output collected, a free port to give them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/carepath.js', import.meta.url));
const STARTUP_MS = 45_000;

/** The parent's environment without any CAREPATH_ setting, plus the ones given. */
export function envWith(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('CAREPATH_')));
  return { ...env, ...settings };
}

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Starts `carepath <args…>` with only the given CAREPATH_ settings; `input`, when given, is piped to its stdin. */
export function start(args: string[], env: Record<string, string>, input?: string): Spawned {
  const child = spawn(process.execPath, [BIN, ...args], { env: envWith(env), stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  if (input !== undefined) child.stdin!.end(input);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Runs a command that ends by itself (`carepath admin …`): its exit code and output. */
export async function runToEnd(args: string[], env: Record<string, string>, input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const spawned = start(args, env, input);
  const code = await spawned.exited;
  return { code, stdout: spawned.stdout(), stderr: spawned.stderr() };
}

/** Waits until the process's stdout matches (or it exits, or the start-up time runs out). */
export async function waitFor(spawned: Spawned, pattern: RegExp): Promise<RegExpMatchArray> {
  const deadline = Date.now() + STARTUP_MS;
  for (;;) {
    const match = spawned.stdout().match(pattern);
    if (match) return match;
    if (spawned.child.exitCode !== null) throw new Error(`exited early:\n${spawned.stdout()}\n${spawned.stderr()}`);
    if (Date.now() > deadline) throw new Error(`no ${pattern} in:\n${spawned.stdout()}\n${spawned.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Ports handed to the service: below Linux's ephemeral range (32768–60999 by default). A port
 * the system picks for `listen(0)` or for an outgoing connection comes from that range, so
 * another test file running meanwhile could take one we chose from it between our check and
 * the service's bind (seen: `listen EADDRINUSE` in the scale-out test); from here, it cannot.
 */
const FIRST_PORT = 20_000;
const PORTS = 12_000;
/** Never the same port twice in one test file (two services asked for ports one after the other). */
const handedOut = new Set<number>();

/** A port nobody listens on right now, outside the ephemeral range, checked by binding it once. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = FIRST_PORT + Math.floor(Math.random() * PORTS);
    if (handedOut.has(port)) continue;
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (bound) {
      await new Promise((resolve) => server.close(resolve));
      handedOut.add(port);
      return port;
    }
  }
}
