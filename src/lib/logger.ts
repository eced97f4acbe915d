import pino, { type Logger } from 'pino';

/**
 * Logs carry what happened, never what was in it: no bodies, FHIR resources, keys or secrets
 * (DESIGN §10). Request logs name method, route and status; the redaction list is a second line
 * of defence for anything that slips through.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'carepath' },
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-service-signature"]',
        'headers.authorization',
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
    },
  });
}

export type { Logger };
