/**
 * A forward proxy on 127.0.0.1 for the outbound proxy tests, doing what a hospital's egress
 * proxy does: plain `http:` requests come in absolute form and are forwarded, `https:` ones
 * open a CONNECT tunnel. It records what it was asked (the target, Proxy-Authorization) and
 * resolves names through its own table, standing in for DNS that only the proxy can reach.
 * Hosts in `refusals` are answered by the proxy itself with that status (its policy forbids
 * them, or it cannot reach them), over CONNECT and in absolute form alike.
 */
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';

export interface ProxyRequest {
  /** `CONNECT` or the method of a forwarded request. */
  method: string;
  /** `host:port` for CONNECT; the absolute URL otherwise. */
  target: string;
  proxyAuthorization: string | undefined;
}

export class ForwardProxy {
  readonly requests: ProxyRequest[] = [];
  private server: http.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  /**
   * `names` maps host names to the `host:port` the proxy really connects to; with `tls` the
   * proxy itself is reached over TLS (an `https://` proxy URL).
   */
  constructor(
    private readonly names: Record<string, string> = {},
    private readonly tls?: { key: Buffer; cert: Buffer },
    private readonly refusals: Record<string, number> = {},
  ) {}

  async listen(): Promise<number> {
    const handler: http.RequestListener = (req, res) => {
      const target = new URL(req.url ?? '/');
      this.requests.push({ method: req.method ?? '', target: target.href, proxyAuthorization: req.headers['proxy-authorization'] });
      const refusal = this.refusals[target.hostname];
      if (refusal) return void res.writeHead(refusal, { 'content-type': 'text/html' }).end('<h1>Access denied by egress policy</h1>');
      const [host, port] = this.route(target.hostname, Number(target.port || 80));
      const headers = { ...req.headers };
      delete headers['proxy-authorization'];
      const upstream = http.request({ host, port, method: req.method, path: `${target.pathname}${target.search}`, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.writeHead(502).end());
      req.pipe(upstream);
    };
    this.server = this.tls ? https.createServer(this.tls, handler) : http.createServer(handler);
    this.server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
      this.requests.push({ method: 'CONNECT', target: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'] });
      const [name, portText] = (req.url ?? '').split(':');
      const refusal = this.refusals[name];
      if (refusal) {
        const page = '<h1>Access denied by egress policy</h1>';
        return void client.end(`HTTP/1.1 ${refusal} Refused\r\ncontent-type: text/html\r\ncontent-length: ${page.length}\r\n\r\n${page}`);
      }
      const [host, port] = this.route(name, Number(portText));
      const upstream = net.connect(port, host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      const drop = () => {
        upstream.destroy();
        client.destroy();
      };
      upstream.on('error', drop);
      client.on('error', drop);
    });
    this.server.on(this.tls ? 'secureConnection' : 'connection', (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  url(credentials = ''): string {
    return `${this.tls ? 'https' : 'http'}://${credentials ? `${credentials}@` : ''}127.0.0.1:${this.port}`;
  }

  private route(name: string, port: number): [string, number] {
    const mapped = this.names[name];
    if (!mapped) return [name, port];
    const [host, mappedPort] = mapped.split(':');
    return [host, Number(mappedPort)];
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
