/**
 * The baseline: a bare Fastify route that returns a small JSON object, on the same machine and
 * Node as the service. Prints `{"port": n}` when it listens.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/bare', async () => ({ ok: true }));
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
