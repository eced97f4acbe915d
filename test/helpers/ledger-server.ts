/**
 * A small HTTP server on 127.0.0.1 that records every request (method, path, headers, body) and
 * answers by path from a script the test sets. The engine's http tests, crash tests and the
 * example blueprint that posts to 127.0.0.1:9099 all talk to one of these.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LedgerRequest {
  method: string;
  path: string;
  /** The request target as sent: path and query. */
  target: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Reply {
  status?: number;
  body?: string | object;
  headers?: Record<string, string>;
  /** Answer only after this long. */
  delayMs?: number;
  /** Never answer (a hung server). */
  hang?: boolean;
}

export class LedgerServer {
  readonly requests: LedgerRequest[] = [];
  private script = new Map<string, Reply[]>();
  private server: http.Server | null = null;
  port = 0;

  /** Answers to a path, in order; the last one repeats. */
  on(path: string, ...replies: Reply[]): void {
    this.script.set(path, replies);
  }

  async listen(port = 0): Promise<number> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = (req.url ?? '/').split('?')[0];
        this.requests.push({ method: req.method ?? '', path, target: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const replies: Reply[] = this.script.get(path) ?? [{ status: 200, body: { ok: true } }];
        const reply = replies.length > 1 ? replies.shift()! : replies[0];
        if (reply.hang) return;
        const send = () => {
          const body = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body ?? { ok: true });
          res.writeHead(reply.status ?? 200, { 'content-type': typeof reply.body === 'string' ? 'text/plain' : 'application/json', ...reply.headers });
          res.end(body);
        };
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  countByKey(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const request of this.requests) {
      const key = String(request.headers['idempotency-key'] ?? '');
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
