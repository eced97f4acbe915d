/**
 * `request.log` made only when it writes. Fastify gives every request a pino child logger bound
 * to its request id; making one serializes the bindings and runs the redaction setup, about
 * 10 µs of a fired trigger's CPU (--cpu-prof of the fire benchmark, docs/benchmarks.md), while
 * at the usual levels a request writes no line at all. This logger stands in for the child and
 * makes it the first time a line is written at a level that is enabled: the lines, their
 * bindings and their redaction are exactly those of the child it makes.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.child().level = level;
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings?: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    this.made ??= this.parent.child(this.bindings, this.options);
    return bindings === undefined ? this.made : this.made.child(bindings, options);
  }

  private write(level: Level, args: unknown[]): void {
    // A level of its own (a route's logLevel, or one set on this logger) decides for itself.
    const enabled = this.made || this.options.level !== undefined ? true : this.parent.isLevelEnabled(level);
    if (!enabled) return;
    const logger = this.child() as unknown as Record<Level, (...line: unknown[]) => void>;
    logger[level](...args);
  }
}

/** Fastify's `childLoggerFactory`: the parent is the service's pino logger (lib/logger.ts). */
export function lazyRequestLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLogger(logger as unknown as Logger, bindings, options);
}
