import { Readable } from 'node:stream';
import { sql, type KyselyPlugin, type QueryId } from 'kysely';
import { afterAll, expect, it } from 'vitest';
import { createContainer, type Container } from '../../src/container.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/lib/logger.js';
import { buildApp } from '../../src/http/app.js';
import type { Api } from '../../src/http/types.js';
import { describeEachStore, type TestEnv } from '../helpers/test-env.js';
import { PostgresRateLimiter, type RateDecision } from '../../src/http/rate-limit/rate-limiter.js';
import type { Db } from '../../src/storage/database.js';

/** For the rate limiter's give-back UPDATE: its answer `delayMs` late, or an error as a statement timeout gives. */
function giveBackHook(mode: { delayMs?: number; fail?: boolean }) {
  const ids = new WeakSet<QueryId>();
  let issued!: () => void;
  const started = new Promise<void>((resolve) => (issued = resolve));
  const plugin: KyselyPlugin = {
    transformQuery(args) {
      const node = args.node as unknown as { kind: string; sqlFragments?: string[] };
      if (node.kind === 'RawNode' && node.sqlFragments?.[0]?.includes('update rate_limit_buckets')) {
        ids.add(args.queryId);
        issued();
      }
      return args.node;
    },
    async transformResult(args) {
      if (ids.has(args.queryId)) {
        if (mode.delayMs) await new Promise((resolve) => setTimeout(resolve, mode.delayMs));
        if (mode.fail) throw Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
      }
      return args.result;
    },
  };
  return { plugin, started };
}

/** Six calls a minute per key: small enough to spend in a test, and nothing refills meanwhile. */
const BUDGET = 6;
const WINDOW_SECONDS = 60;

/** A second service process on the same PostgreSQL schema, as far as the store can tell. */
async function secondProcess(env: TestEnv): Promise<{ container: Container; app: Api }> {
  const schema = env.schema;
  const container = await createContainer(
    loadConfig({ CAREPATH_DATABASE_URL: env.container.config.databaseUrl, CAREPATH_RATE_LIMIT: `${BUDGET}/${WINDOW_SECONDS}s` }),
    { logger: createLogger('silent'), storeOptions: { schema, poolSize: 2 } },
  );
  const app = await buildApp(container);
  await app.ready();
  return { container, app };
}

describeEachStore(
  'rate limiting per API key',
  (env) => {
    const others: { container: Container; app: Api }[] = [];
    afterAll(async () => {
      for (const { app, container } of others) {
        await app.close();
        await container.close();
      }
    });

    it('tells every answer the budget left, then answers 429 rate_limited with Retry-After', async () => {
      const ws = await env.workspace();
      const remaining: number[] = [];
      for (let i = 0; i < BUDGET; i++) {
        const res = await ws.call('GET', '/v1/me');
        expect(res.statusCode).toBe(200);
        expect(Number(res.headers['ratelimit-limit'])).toBe(BUDGET);
        // Seconds until the bucket is full again: never more than the window it refills in.
        expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
        expect(Number(res.headers['ratelimit-reset'])).toBeLessThanOrEqual(WINDOW_SECONDS);
        remaining.push(Number(res.headers['ratelimit-remaining']));
      }
      expect(remaining.at(-1)).toBe(0);
      for (let i = 1; i < remaining.length; i++) expect(remaining[i]).toBeLessThanOrEqual(remaining[i - 1]);

      const refused = await ws.call('GET', '/v1/me', { headers: { 'x-request-id': 'req-over-budget' } });
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toEqual({ error: expect.any(String), code: 'rate_limited', requestId: 'req-over-budget' });
      // Seconds until one token is back: at least one, at most the window (10 s here).
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(WINDOW_SECONDS);
      expect(refused.headers['ratelimit-remaining']).toBe('0');
      expect(Number(refused.headers['ratelimit-reset'])).toBeGreaterThan(0);
      expect(Number(refused.headers['ratelimit-reset'])).toBeLessThanOrEqual(WINDOW_SECONDS);
    });

    it('lets a burst of concurrent calls through up to the budget, and no further', async () => {
      const ws = await env.workspace();
      const answers = await Promise.all(Array.from({ length: BUDGET + 4 }, () => ws.call('GET', '/v1/me')));
      const statuses = answers.map((res) => res.statusCode).sort();
      expect(statuses).toEqual([...Array<number>(BUDGET).fill(200), 429, 429, 429, 429]);
    });

    it('weighs a body: one token more for each full 64 KiB, declared or read, at most the whole budget', async () => {
      const ws = await env.workspace();
      const remaining = (res: { headers: Record<string, unknown> }) => Number(res.headers['ratelimit-remaining']);
      // 3 × 64 KiB and a little: four tokens, whatever the answer (here a 400: the name is too long).
      const heavy = JSON.stringify({ name: 'x'.repeat(3 * 65_536), resourceType: 'Patient' });
      const refusedName = await ws.call('POST', '/v1/queries', { payload: heavy, headers: { 'content-type': 'application/json' } });
      expect(refusedName.statusCode).toBe(400);
      expect(remaining(refusedName)).toBe(BUDGET - 4);
      expect(remaining(await ws.call('GET', '/v1/me'))).toBe(BUDGET - 5);

      // Sent without Content-Length (chunked), it is weighed once read.
      const sendChunked = (key: string, text: string) =>
        env.app.inject({
          method: 'POST',
          url: '/v1/queries',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          payload: Readable.from([Buffer.from(text)]),
        });
      const chunked = await env.workspace();
      expect((await sendChunked(chunked.key, heavy)).statusCode).toBe(400);
      expect(remaining(await chunked.call('GET', '/v1/me'))).toBe(BUDGET - 5);
      // Refused as it is read (not JSON), it pays after the answer; weighed in bytes, not characters.
      const unreadable = await env.workspace();
      expect((await sendChunked(unreadable.key, `${heavy}}`)).statusCode).toBe(400);
      // Counted in the answer's onResponse hook, which may finish just after the answer arrives.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(remaining(await unreadable.call('GET', '/v1/me'))).toBe(BUDGET - 5);
      const wide = await env.workspace();
      // 70,000 characters of three bytes each: 210,000 bytes, three full 64 KiB.
      const cjk = JSON.stringify({ name: '字'.repeat(70_000), resourceType: 'Patient' });
      expect((await sendChunked(wide.key, cjk)).statusCode).toBe(400);
      expect(remaining(await wide.call('GET', '/v1/me'))).toBe(BUDGET - 5);

      // Heavier than the budget: it takes the whole of it, so it passes only with the bucket full.
      const whole = await env.workspace();
      const huge = JSON.stringify({ name: 'x'.repeat(10 * 65_536), resourceType: 'Patient' });
      const first = await whole.call('POST', '/v1/queries', { payload: huge, headers: { 'content-type': 'application/json' } });
      expect(first.statusCode).toBe(400);
      expect(remaining(first)).toBe(0);
      const next = await whole.call('GET', '/v1/me');
      expect(next.statusCode).toBe(429);
      expect(next.json()).toMatchObject({ code: 'rate_limited', requestId: expect.any(String) });
    });

    it('gives each key a budget of its own, within one workspace too', async () => {
      const ws = await env.workspace();
      for (let i = 0; i < BUDGET; i++) await ws.call('GET', '/v1/me');
      expect((await ws.call('GET', '/v1/me')).statusCode).toBe(429);
      const other = await ws.keyWith([]);
      expect((await ws.call('GET', '/v1/me', { key: other.key })).statusCode).toBe(200);
    });

    it('answers an unknown key 401, not 429, once a real key has spent its budget', async () => {
      const ws = await env.workspace();
      for (let i = 0; i < BUDGET + 2; i++) await ws.call('GET', '/v1/me');
      const unknown = await ws.call('GET', '/v1/me', { key: `cpk_staging_${'B'.repeat(43)}` });
      expect(unknown.statusCode).toBe(401);
    });

    if (env.kind === 'postgres') {
      it('shares one budget between processes on PostgreSQL', async () => {
        const second = await secondProcess(env);
        others.push(second);
        const ws = await env.workspace();
        const callSecond = () => second.app.inject({ method: 'GET', url: '/v1/me', headers: { authorization: `Bearer ${ws.key}` } });
        // Half the budget through each process, alternating.
        for (let i = 0; i < BUDGET; i++) {
          const res = i % 2 === 0 ? await ws.call('GET', '/v1/me') : await callSecond();
          expect(res.statusCode).toBe(200);
        }
        expect((await ws.call('GET', '/v1/me')).statusCode).toBe(429);
        expect((await callSecond()).statusCode).toBe(429);
      });

      it('gives back what a lease did not spend: a caller of a per-hour budget, once a second, spends one token a call', async () => {
        // 1000 an hour: a lease is a chunk of 50 for a second; 100 calls 1.1 s apart are a tenth of the budget.
        let now = Date.now();
        const limiter = new PostgresRateLimiter(env.db, { requests: 1000, perSeconds: 3600 }, () => now);
        const answers: RateDecision[] = [];
        for (let i = 0; i < 100; i++) {
          answers.push(await limiter.take('key:sparse'));
          now += 1100;
        }
        expect(answers.filter((answer) => answer.allowed)).toHaveLength(100);
        // Before, 49 of each 50 leased were dropped: 21 calls spent the hour's budget.
        const row = await sql<{ tokens: number }>`select tokens from rate_limit_buckets where key = 'key:sparse'`.execute(env.db);
        expect(Number(row.rows[0].tokens)).toBeGreaterThanOrEqual(1000 - 100 - 50);
        expect(answers.at(-1)!.remaining).toBeGreaterThanOrEqual(1000 - 100);
        // Another process of the same budget sees what was given back, not 21 calls' worth of leases.
        const other = new PostgresRateLimiter(env.db, { requests: 1000, perSeconds: 3600 });
        expect((await other.take('key:sparse', 900)).allowed).toBe(false);
        expect((await other.take('key:sparse', 800)).allowed).toBe(true);
      });

      it('asks the store again for a heavy call that joined a renewal sized for lighter ones', async () => {
        const limiter = new PostgresRateLimiter(env.db, { requests: 100, perSeconds: 1 });
        // A small call and a 400 KiB body (7 tokens) at once, on a fresh bucket of 100.
        const [small, heavy] = await Promise.all([limiter.take('key:heavy', 1), limiter.take('key:heavy', 7)]);
        expect(small.allowed).toBe(true);
        expect(heavy.allowed).toBe(true);
        // Spent: refused once the store has too few, however it was asked.
        const spent = new PostgresRateLimiter(env.db, { requests: 10, perSeconds: 3600 });
        expect((await spent.take('key:spent', 8)).allowed).toBe(true);
        const [a, b] = await Promise.all([spent.take('key:spent', 1), spent.take('key:spent', 5)]);
        expect([a.allowed, b.allowed]).toEqual([true, false]);
      });

      it('leaves what a refused call was granted to the other processes at once', async () => {
        const setting = { requests: 100, perSeconds: 3600 };
        const [first, second] = [new PostgresRateLimiter(env.db, setting), new PostgresRateLimiter(env.db, setting)];
        for (let i = 0; i < 80; i++) expect((await second.take('key:strand')).allowed).toBe(true);
        // 20 left of 100 (and the second process's lease holds what it has not spent yet).
        expect((await first.take('key:strand', 30)).allowed).toBe(false);
        // Kept in the refused call's lease, those tokens were no one's until that process's next call of the key.
        let allowed = 0;
        for (let i = 0; i < 30; i++) if ((await second.take('key:strand')).allowed) allowed++;
        expect(allowed).toBeGreaterThanOrEqual(19);
        expect(allowed).toBeLessThanOrEqual(20);
      });

      it('asks the store afresh for a call that comes while a refused call gives its tokens back', async () => {
        const setting = { requests: 100, perSeconds: 3600 };
        const bucket = 'key:during-give-back';
        const hook = giveBackHook({ delayMs: 300 });
        const first = new PostgresRateLimiter(env.db.withPlugin(hook.plugin) as Db, setting);
        const second = new PostgresRateLimiter(env.db, setting);
        for (let i = 0; i < 80; i++) await second.take(bucket);
        const heavy = first.take(bucket, 30); // 20 granted, refused, given back (its answer 300 ms late)
        await hook.started;
        // Meanwhile another process gives back 40 of its own.
        await sql`update rate_limit_buckets set tokens = least(100, tokens + 40) where key = ${bucket}`.execute(env.db);
        const [refused, meanwhile] = await Promise.all([heavy, first.take(bucket, 25)]);
        expect(refused.allowed).toBe(false);
        // Before: refused on the refused call's lease (it had asked for 30 and got 20), with 60 in the row.
        expect(meanwhile.allowed).toBe(true);
      });

      it('answers 429, not an error, when giving back fails; calls queued behind it go on', async () => {
        const setting = { requests: 100, perSeconds: 3600 };
        const bucket = 'key:give-back-fails';
        const hook = giveBackHook({ delayMs: 200, fail: true });
        const first = new PostgresRateLimiter(env.db.withPlugin(hook.plugin) as Db, setting);
        const second = new PostgresRateLimiter(env.db, setting);
        for (let i = 0; i < 80; i++) await second.take(bucket);
        const outcome = (call: Promise<RateDecision>) => call.then((decision) => decision.allowed, (error: Error) => error.message);
        const heavy = outcome(first.take(bucket, 30));
        await hook.started;
        const light = outcome(first.take(bucket, 1));
        expect(await Promise.all([heavy, light])).toEqual([false, true]);
      });

      it('gives nothing back that lighter calls beside the refused one were granted: they pass', async () => {
        const setting = { requests: 100, perSeconds: 3600 };
        for (let round = 0; round < 6; round++) {
          const bucket = `key:beside-${round}`;
          const [first, second] = [new PostgresRateLimiter(env.db, setting), new PostgresRateLimiter(env.db, setting)];
          for (let i = 0; i < 80; i++) await second.take(bucket);
          const calls = round % 2 === 0 ? [first.take(bucket, 30), first.take(bucket, 1), first.take(bucket, 1)] : [first.take(bucket, 1), first.take(bucket, 1), first.take(bucket, 30)];
          const answers = await Promise.all(calls);
          expect(answers.map((answer) => [answer.allowed, answer.limit]).filter(([allowed]) => allowed)).toHaveLength(2);
        }
      });
    }
  },
  { env: { CAREPATH_RATE_LIMIT: `${BUDGET}/${WINDOW_SECONDS}s` } },
);
