/**
 * `http`: `{method, url, headers, body, timeoutMs}` with placeholders filled. A 2xx answer
 * succeeds with output `{status, body}` (JSON parsed when it parses, the body capped at 64 KiB).
 * 5xx, 429 and network failures are tried again with backoff and jitter, a few times; then,
 * like any other answer, the step fails and the run errors. Every try carries
 * `Idempotency-Key: <runId>:<nodeId>:<automationId>`, and a retried step (its worker lost before
 * the outcome was recorded) sends the same key again, so the receiver can drop the duplicate.
 */
import type { HttpWith } from '../../modules/blueprints/blueprint.js';
import { render } from '../run-context.js';
import type { StepResult } from '../executor.js';
import { backoffDelay, isRetryableStatus, retryAfterMs } from '../outbound/backoff.js';
import { OutboundNetworkError, OutboundRefusedError, sendOutbound, type OutboundAnswer } from '../outbound/outbound-request.js';
import { StepFailure, type AutomationHandler, type StepRequest } from './automation.js';

export const MAX_HTTP_BODY_BYTES = 64 * 1024;

export const httpAutomation: AutomationHandler = {
  mode: 'call',
  async call(step, services) {
    const settings = render(step.expressions, step.context, step.automation.with as HttpWith);
    const url = parseUrl(settings.url);
    const headers = requestHeaders(settings, step.stepKey);
    const body = settings.body === undefined || settings.method === 'GET' ? null : JSON.stringify(settings.body);
    if (body !== null) headers['content-type'] ??= 'application/json';
    const { backoff } = services.outbound;
    const where = `${settings.method} ${url.origin}${url.pathname}`;
    let lastProblem = '';
    for (let attempt = 1; attempt <= backoff.attempts; attempt++) {
      let answer: OutboundAnswer | null = null;
      try {
        answer = await sendOutbound(
          { method: settings.method, url, headers, body, timeoutMs: settings.timeoutMs ?? services.outbound.timeoutMs, maxBodyBytes: MAX_HTTP_BODY_BYTES },
          services.outbound.allow,
          services.outbound.proxy,
        );
      } catch (error) {
        if (error instanceof OutboundRefusedError) throw new StepFailure(`http ${where} refused: ${error.message}`);
        if (!(error instanceof OutboundNetworkError)) throw error;
        lastProblem = error.message;
      }
      if (answer && !answer.fromProxy && answer.status >= 200 && answer.status < 300) {
        return { outcome: 'ok', output: answerOutput(answer) };
      }
      if (answer && !isRetryableStatus(answer.status)) return failed(step, `http ${where} ${problemOf(answer, url)}`, answer);
      if (answer) lastProblem = problemOf(answer, url);
      if (attempt === backoff.attempts) {
        return failed(step, `http ${where} ${lastProblem} (after ${attempt} tries)`, answer);
      }
      const hinted = answer ? retryAfterMs(headerText(answer.headers['retry-after']), Date.now()) : null;
      const delay = hinted !== null ? Math.min(hinted, backoff.maxMs) : backoffDelay(attempt, backoff);
      services.logger.warn({ runId: step.run.id, nodeId: step.nodeId, automationId: step.automation.id, attempt, problem: lastProblem }, 'http automation will try again');
      await new Promise((wake) => setTimeout(wake, delay));
    }
    throw new Error('unreachable: the loop returns on its last try');
  },
};

function parseUrl(text: unknown): URL {
  if (typeof text !== 'string' || !URL.canParse(text)) throw new StepFailure('http: with.url is not a URL once its placeholders are filled');
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new StepFailure('http: with.url must be http or https');
  if (url.username || url.password) throw new StepFailure('http: with.url may not carry a user name or password; use a header');
  return url;
}

function requestHeaders(settings: HttpWith, stepKey: string): Record<string, string> {
  const headers: Record<string, string> = {};
  // Lower-cased names, so a header given twice in other cases is one header.
  for (const [name, value] of Object.entries(settings.headers ?? {})) headers[name.toLowerCase()] = String(value);
  // The step's own key, whatever the blueprint says: it is what makes a repeated call safe.
  headers['idempotency-key'] = stepKey;
  headers['user-agent'] ??= 'carepath';
  return headers;
}

/**
 * What went wrong, in words that send the reader to the right people: the partner's answer, or
 * the proxy's own when the partner was never reached.
 */
function problemOf(answer: OutboundAnswer, url: URL): string {
  if (!answer.fromProxy) return `answered ${answer.status}`;
  if (answer.status === 407) return 'was refused by the proxy: it wants credentials (407); give them in CAREPATH_HTTP_PROXY as user:password@';
  return `was not passed on by the proxy: it answered ${answer.status} instead of connecting to ${url.host}`;
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `{status, body}`: the body parsed when it is JSON, else its text; null when empty. */
function answerOutput(answer: OutboundAnswer): { status: number; body: unknown; truncated?: true } {
  let body: unknown = answer.body === '' ? null : answer.body;
  if (answer.body !== '' && !answer.truncated) {
    try {
      body = JSON.parse(answer.body);
    } catch {
      // Not JSON: keep the text.
    }
  }
  return answer.truncated ? { status: answer.status, body, truncated: true } : { status: answer.status, body };
}

/** The step's output is the partner's answer; a proxy's error page is none. */
function failed(step: StepRequest, message: string, answer: OutboundAnswer | null): StepResult {
  return {
    outcome: 'failed',
    output: answer && !answer.fromProxy ? answerOutput(answer) : null,
    end: { status: 'errored', nodeId: step.nodeId, message },
  };
}

