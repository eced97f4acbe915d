import pino, { type DestinationStream, type Logger } from 'pino';
import { loggableError } from './store-errors.js';

/**
 * Logs carry what happened, never what was in it: no bodies, FHIR resources, keys or secrets
 * (DESIGN §10). Request logs name method, route and status; the redaction list is a second line
 * of defence for anything that slips through. Lines go to standard output, or to `destination`
 * (tests read them back).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'carepath' },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-service-signature"]',
        'headers.authorization',
        // At the top of a line and one level down (pino's `*` is exactly one level).
        'secret',
        'key',
        'payload',
        'resource',
        'body',
        '*.secret',
        '*.key',
        '*.payload',
        '*.resource',
        '*.body',
      ],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: { method: string; url: string; id?: string }) => ({
        method: req.method,
        // The path only: query strings may carry search words.
        url: req.url.split('?')[0],
        id: req.id,
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      // What the code logs under `err` is loggableError's already: kept as it is (pino's own
      // serializer took it for an error and wrote `type: "Object"`, `stack: ""`). An Error that
      // reaches a line as it is gets the same treatment, its message only when it names no data.
      err: (err: unknown) => (err instanceof Error ? loggableError(err, { frames: true }) : err),
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
