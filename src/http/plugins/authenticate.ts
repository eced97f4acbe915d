import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Container } from '../../container.js';
import { ApiError } from '../../lib/errors.js';
import { allows, type Scope } from '../../auth/scopes.js';
import { looksLikeApiKey } from '../../auth/api-keys.js';
import type { RequestContext } from '../../auth/context.js';
import type { RateDecision } from '../rate-limit/rate-limiter.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; `null` = any valid key. Every authenticated route must say. */
    scope?: Scope | null;
  }
  interface FastifyRequest {
    ctx: RequestContext;
  }
}

/**
 * A request takes one token, and one more for each full 64 KiB of its body. Parsing, checking
 * and storing a body costs the serving thread in proportion to its size and shape: a 1 MiB
 * payload of 62,000 keys held it about 0.2 s, so a burst of a hundred such fires, within a
 * budget of 100 requests, held every workspace for 28 s (a resource review). Weighted, a key's
 * budget buys about as much of the thread whatever its bodies weigh; a small request costs what
 * it did.
 */
export const BODY_BYTES_PER_TOKEN = 64 * 1024;
const tokensForBody = (bytes: number) => 1 + Math.floor(bytes / BODY_BYTES_PER_TOKEN);

export function setRateLimitHeaders(reply: FastifyReply, decision: RateDecision): void {
  reply.header('RateLimit-Limit', decision.limit);
  reply.header('RateLimit-Remaining', decision.remaining);
  reply.header('RateLimit-Reset', decision.resetSeconds);
}

export function rateLimitedError(decision: RateDecision): ApiError {
  return new ApiError('rate_limited', 'rate limit exceeded; back off and retry with jitter', {
    'Retry-After': String(decision.retryAfterSeconds),
  });
}

function presentedKey(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}

/**
 * Why no key was found, as far as the request itself shows: a missing header and a header of
 * another form are said apart (the caller's own mistake, nothing about any key); an unknown key
 * and a revoked one are not.
 */
function whyNoKey(request: FastifyRequest): string {
  if (!request.headers.authorization) return 'no API key: send the header Authorization: Bearer <key>';
  if (presentedKey(request) === null) return 'the Authorization header must read Bearer <key>';
  return 'invalid or revoked API key';
}

/**
 * Every route registered in this context needs a key. The order is fixed: who (401), how often
 * (429), may they (403). The key is looked up on every request, never cached, so a revoked key
 * fails on the very next call of any process.
 *
 * A key works only in the environment it was issued for (its `cpk_<environment>_` prefix): a
 * staging key copied into a production integration is refused, and a key issued from an admin
 * shell without the deployment's CAREPATH_ENVIRONMENT says so at its first call.
 */
export function requireApiKey(app: FastifyInstance, container: Container): void {
  app.addHook('onRoute', (route) => {
    if (route.config?.scope === undefined) {
      throw new Error(`route ${route.method} ${route.url} must declare config.scope (null for any key)`);
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    const secret = presentedKey(request);
    const key = secret && looksLikeApiKey(secret) ? await container.keys.resolve(secret) : null;
    if (!key) throw new ApiError('invalid_api_key', whyNoKey(request));
    request.askedBy = { keyId: key.keyId, workspaceId: key.workspaceId };
    const deployment = container.config.environment;
    if (key.environment !== deployment) {
      throw new ApiError(
        'invalid_api_key',
        `this is a ${key.environment} key and this deployment is ${deployment}: use a key issued with CAREPATH_ENVIRONMENT=${deployment}`,
      );
    }

    // Weighed by the length it declares before it is read; a body sent without one is weighed
    // once read (preValidation, below).
    const declared = Number(request.headers['content-length'] ?? 0);
    const decision = await container.rateLimiter.take(`key:${key.keyId}`, tokensForBody(Number.isFinite(declared) ? declared : 0));
    setRateLimitHeaders(reply, decision);
    if (!decision.allowed) throw rateLimitedError(decision);

    const needed = request.routeOptions.config.scope ?? null;
    if (!allows(key.scopes, needed)) {
      throw new ApiError('insufficient_scope', `this key lacks the scope ${needed}`);
    }
    request.ctx = { ...key, requestId: request.id };
  });

  // A body that came without Content-Length pays for its weight once read: before the route
  // runs, or, when it was refused as it was read (not JSON, too deep), after the answer.
  const weighUndeclaredBody = async (request: FastifyRequest) => {
    const bytes = request.undeclaredBodyBytes;
    request.undeclaredBodyBytes = undefined;
    const extra = tokensForBody(bytes ?? 0) - 1;
    return extra > 0 && request.ctx ? container.rateLimiter.take(`key:${request.ctx.keyId}`, extra) : undefined;
  };
  app.addHook('preValidation', async (request, reply) => {
    const decision = await weighUndeclaredBody(request);
    if (!decision) return;
    setRateLimitHeaders(reply, decision);
    if (!decision.allowed) throw rateLimitedError(decision);
  });

  app.addHook('onResponse', async (request, reply) => {
    // The answer is sent: a store that failed to count is not worth an error now.
    await weighUndeclaredBody(request).catch(() => undefined);
    if (request.ctx && reply.statusCode < 400) container.keyUsage.record(request.ctx.keyId);
  });
}
