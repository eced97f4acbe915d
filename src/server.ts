/**
 * Listening and closing: app.ts builds the Fastify app and never listens; this file puts it on
 * the network and takes it off again, and turns SIGINT/SIGTERM into a graceful stop.
 */
import type { Container } from './container.js';
import { buildApp } from './http/app.js';
import { ConfigError } from './config.js';

export interface RunningServer {
  /** Where it listens, such as http://127.0.0.1:8080. */
  url: string;
  /** Stops accepting connections and waits for the requests in flight to be answered. */
  close(): Promise<void>;
}

export async function startServer(container: Container): Promise<RunningServer> {
  const app = await buildApp(container, { logRequests: true });
  try {
    const url = await app.listen({
      host: container.config.host,
      port: container.config.port,
      // Fastify logs this line itself once it listens; it is the line operators wait for.
      listenTextResolver: (address) => `carepath listening on ${address}`,
    });
    return { url, close: () => app.close() };
  } catch (error) {
    await app.close();
    throw listenProblem(error, container.config.host, container.config.port) ?? error;
  }
}

/**
 * Why listening failed, as a sentence naming the variable to change, for the failures a setting
 * causes: the port taken, or a host that is not this machine's. They read "failed: listen
 * EADDRINUSE …" and "getaddrinfo ENOTFOUND …" (an operations review).
 */
function listenProblem(error: unknown, host: string, port: number): ConfigError | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'EADDRINUSE') return new ConfigError(`CAREPATH_PORT ${port} on CAREPATH_HOST ${host} is in use by another process; stop it or choose another port`);
  if (code === 'EACCES') return new ConfigError(`CAREPATH_PORT ${port} needs privileges this process lacks; choose a port above 1023`);
  if (code === 'ENOTFOUND' || code === 'EADDRNOTAVAIL' || code === 'EAI_AGAIN') {
    return new ConfigError(`CAREPATH_HOST ${host} is not an address of this machine (or its name does not resolve); use 127.0.0.1, 0.0.0.0 or one of its addresses`);
  }
  return null;
}

/** Exit codes of a process ended by a signal (128 + its number), used when a stop is forced. */
const FORCED_EXIT: Record<'SIGINT' | 'SIGTERM', number> = { SIGINT: 130, SIGTERM: 143 };

/**
 * Resolves at the first SIGINT or SIGTERM, so the caller can stop gracefully. A second signal
 * means "now": the process exits at once, for an operator who will not wait for a slow stop.
 */
export function shutdownSignal(forceExit: (code: number) => void = (code) => process.exit(code)): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const signals = Object.keys(FORCED_EXIT) as (keyof typeof FORCED_EXIT)[];
    const force = (signal: keyof typeof FORCED_EXIT) => forceExit(FORCED_EXIT[signal]);
    const first = (signal: keyof typeof FORCED_EXIT) => {
      for (const name of signals) {
        process.off(name, first);
        process.on(name, force);
      }
      resolve(signal);
    };
    for (const name of signals) process.on(name, first);
  });
}
