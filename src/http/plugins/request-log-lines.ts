/**
 * The line each request ends with (`request completed`), with what an engineer looks for in a
 * refused one: the answer's error `code` (`invalid_signature` and `signature_expired` are both a
 * 401), and who asked: the key's id and workspace, or the webhook endpoint a delivery named.
 * Fastify's own line had the status only, and a refused delivery is stored and audited nowhere:
 * the log is its only trace (an observability review, 2026-11-27). Ids only, never the key.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The `code` of the error this request was answered with (plugins/errors.ts `sendError`). */
    answerCode?: string;
    /**
     * The key that asked, known as soon as it is looked up: a call refused after that (429, 403,
     * a key of another environment) has no `ctx`, and its line named no one; the caller still
     * holding a key being rotated out is found by them (a review, 2026-11-28).
     */
    askedBy?: { keyId: string; workspaceId: string };
  }
}

function whoAsked(request: FastifyRequest): Record<string, string> {
  const ctx = request.ctx as FastifyRequest['ctx'] | undefined;
  if (ctx) return { keyId: ctx.keyId, workspaceId: ctx.workspaceId };
  if (request.askedBy) return { ...request.askedBy };
  const webhookId = (request.params as { webhookId?: unknown } | undefined)?.webhookId;
  return typeof webhookId === 'string' && request.routeOptions.url === '/v1/webhooks/:webhookId' ? { webhookId } : {};
}

export class RequestLogLines extends LogController {
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const line = { res: reply, responseTime: reply.elapsedTime, ...(request.answerCode ? { code: request.answerCode } : {}), ...whoAsked(request) };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}
