/**
 * `http`: `{method, url, headers, body, timeoutMs}` with placeholders filled. A 2xx answer
 * succeeds with output `{status, body}` (JSON parsed when it parses, the body capped at 64 KiB).
 * 5xx, 429 and network failures are tried again with backoff and jitter, a few times; then,
 * like any other answer, the step fails and the run errors. Every try carries
 * `Idempotency-Key: <runId>:<nodeId>:<automationId>`, and a retried step (its worker lost before
 * the outcome was recorded) sends the same key again, so the receiver can drop the duplicate.
 *
 * A header may name workspace secrets (`Bearer ${secrets.LAB_TOKEN}`, set with `carepath admin
 * secret set`): such a header is taken as written, without placeholders (so data can never
 * name a secret), and the values are filled in just before the call. A partner that echoes a
 * secret back has it replaced by `[secret]` in the step's output.
 *
 * What was sent, to which origin, how many times and with what answer is handed back with the
 * result (`sent`) and audited with the step's outcome (`http.send`, engine-audit.ts): the run's
 * data left the service. A call that never sent anything (refused by the allow-list, a secret
 * missing) has none.
 */
import type { HttpWith } from '../../modules/blueprints/blueprint.js';
import { render, renderText, renderUrl } from '../run-context.js';
import { UrlTemplateError } from '../../lib/placeholders.js';
import type { StepResult } from '../executor.js';
import { backoffDelay, isRetryableStatus, retryAfterMs } from '../outbound/backoff.js';
import { DOUBLE_SLASH, OutboundNetworkError, OutboundRefusedError, sendOutbound, type OutboundAnswer } from '../outbound/outbound-request.js';
import { CallAbandoned, requireValidFilled, StepFailure, type AutomationHandler, type CallOutcome, type StepRequest } from './automation.js';
import { fillSecrets, mentionsSecrets, secretNamesIn } from '../../modules/secrets/secret-refs.js';
import { isTransientStoreError } from '../../lib/store-errors.js';
import { redactText, redactValue, secretForms } from './redact-secrets.js';

export const MAX_HTTP_BODY_BYTES = 64 * 1024;

export const httpAutomation: AutomationHandler = {
  mode: 'call',
  target(step) {
    try {
      const { method } = render(step.expressions, step.context, { method: (step.automation.with as HttpWith).method }) as { method: unknown };
      return typeof method === 'string' ? { method, origin: parseUrl(urlOf(step)).origin } : null;
    } catch {
      return null;
    }
  },
  async call(step, services) {
    const written = step.automation.with as HttpWith;
    const { plain, named } = splitSecretHeaders(written.headers);
    // The URL apart (urlOf): what fills its path or query is encoded, so data cannot change the endpoint.
    const { url: _url, headers: _headers, ...rest } = written;
    // Header values are text: one placeholder alone gives its value's text (an object its JSON).
    const headers = Object.fromEntries(Object.entries(plain).map(([name, value]) => [name, renderText(step.expressions, step.context, value)]));
    const settings = { ...render(step.expressions, step.context, rest), headers };
    const urlText = urlOf(step);
    // A method or timeout filled from data must still be one import would take, the URL as it
    // will be sent an http one, and a header value one a header can carry (a line break filled
    // in was Node's bare "Invalid character in header content").
    requireValidFilled('http', { ...settings, url: urlText });
    const url = parseUrl(urlText);
    const body = settings.body === undefined || settings.method === 'GET' ? null : JSON.stringify(settings.body);
    // Made at the first try that can read the secrets: a database that does not answer is
    // retried like a network failure. The same headers then go with every try.
    let prepared: { headers: Record<string, string>; secretValues: string[] } | null = null;
    const answerOutput = (answer: OutboundAnswer) => outputOf(answer, prepared?.secretValues ?? []);
    const { backoff } = services.outbound;
    const where = `${settings.method} ${url.origin}${url.pathname}`;
    let lastProblem = '';
    // What the retry's log line says: never the host or path (placeholders may have filled them).
    let lastKind = '';
    // Requests that left (prepared and handed to the network), and the last answer's status.
    let sentTries = 0;
    let lastStatus: number | null = null;
    const outcome = (result: StepResult): CallOutcome =>
      sentTries === 0 ? { result } : { result, sent: { method: settings.method, origin: url.origin, tries: sentTries, status: lastStatus } };
    for (let attempt = 1; attempt <= backoff.attempts; attempt++) {
      let answer: OutboundAnswer | null = null;
      // A try the allow-list refuses sent nothing: the answer before it stays the last one.
      const statusBefore = lastStatus;
      try {
        prepared ??= await prepareHeaders(settings, named, body !== null, step, services.outbound.secrets);
        sentTries++;
        lastStatus = null;
        answer = await sendOutbound(
          {
            method: settings.method,
            url,
            headers: prepared.headers,
            body,
            timeoutMs: settings.timeoutMs ?? services.outbound.timeoutMs,
            maxBodyBytes: MAX_HTTP_BODY_BYTES,
            beforeSend: () => sendOnlyWhileHeld(step),
          },
          services.outbound.allow,
          services.outbound.proxy,
        );
      } catch (error) {
        if (error instanceof OutboundRefusedError) {
          // Refused before connecting: this try sent nothing (an earlier one may have).
          sentTries--;
          lastStatus = statusBefore;
          // Worth a line for whoever watches for a blueprint probing the network: which run and
          // step (the run's error says which address; it is not logged, data may have named it).
          services.logger.warn(
            { runId: step.run.id, nodeId: step.nodeId, automationId: step.automation.id, try: attempt },
            'http automation refused before sending: the run errored (its error says why)',
          );
          return outcome(failed(step, `http ${where} refused: ${error.message}`, null, answerOutput));
        }
        if (isTransientStoreError(error)) [lastProblem, lastKind] = ['could not read its secrets: the database did not answer', 'database'];
        else if (error instanceof OutboundNetworkError) [lastProblem, lastKind] = [error.message, error.kind];
        else throw error;
      }
      if (answer) lastStatus = answer.status;
      if (answer && !answer.fromProxy && answer.status >= 200 && answer.status < 300) {
        return outcome({ outcome: 'ok', output: answerOutput(answer) });
      }
      if (answer && !isRetryableStatus(answer.status)) return outcome(failed(step, `http ${where} ${problemOf(answer, url)}`, answer, answerOutput));
      if (answer) [lastProblem, lastKind] = [problemOf(answer, url), answer.fromProxy ? `proxy status ${answer.status}` : `status ${answer.status}`];
      if (attempt === backoff.attempts) {
        return outcome(failed(step, `http ${where} ${lastProblem} (after ${attempt} tries)`, answer, answerOutput));
      }
      const hinted = answer ? retryAfterMs(headerText(answer.headers['retry-after']), Date.now()) : null;
      const delay = hinted !== null ? Math.min(hinted, backoff.maxMs) : backoffDelay(attempt, backoff);
      // `try`, of `tries`: the step timeline's `attempt` counts something else (executions of the
      // step, a new one after a worker was lost), and one name for both misled (an on-call review).
      services.logger.warn(
        { runId: step.run.id, nodeId: step.nodeId, automationId: step.automation.id, try: attempt, tries: backoff.attempts, problem: lastKind },
        'http automation will try again',
      );
      await new Promise((wake) => setTimeout(wake, delay));
      // The run may have been taken over while this worker stalled (its try then timed out):
      // the new holder repeats the call itself, and this one must not send it a second time.
      // Or it was canceled or paused meanwhile: cancel is final, and a pause holds what is not
      // sent yet (the resumed run makes the call again, with the same key).
      if (!(await step.mayTryAgain())) throw new CallAbandoned('the run was taken over, paused or canceled before the next try');
    }
    throw new Error('unreachable: the loop returns on its last try');
  },
};

/**
 * Every try, the first included, goes only while this worker's lease holds by its own clock: a
 * worker that stalled past it since the step was recorded (or since the try before) may find
 * the call made by the run's new holder, its outcome recorded (StepRequest.holdsLease).
 */
function sendOnlyWhileHeld(step: StepRequest): void {
  if (!step.holdsLease()) throw new CallAbandoned('the lease on the run ran out before the call was sent: another worker may hold the run');
}

function urlOf(step: StepRequest): unknown {
  try {
    return renderUrl(step.expressions, step.context, (step.automation.with as HttpWith).url);
  } catch (error) {
    if (error instanceof UrlTemplateError) throw new StepFailure(`http: with.url: ${error.message}`);
    throw error;
  }
}

function parseUrl(text: unknown): URL {
  if (typeof text !== 'string' || !URL.canParse(text)) throw new StepFailure('http: with.url is not a URL once its placeholders are filled');
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new StepFailure('http: with.url must be http or https');
  if (url.username || url.password) throw new StepFailure('http: with.url may not carry a user name or password; use a header');
  if (url.pathname.startsWith('//')) throw new StepFailure(`http: with.url's path starts with "//" once its placeholders are filled (${DOUBLE_SLASH})`);
  return url;
}

/** The headers as written, apart: those that name secrets, and the rest (which may hold placeholders). */
function splitSecretHeaders(headers: Record<string, string> | undefined): { plain: Record<string, string>; named: [string, string][] } {
  const plain: Record<string, string> = {};
  const named: [string, string][] = [];
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (typeof value === 'string' && mentionsSecrets(value)) named.push([name, value]);
    else plain[name] = value;
  }
  return { plain, named };
}

/** The request's headers, secrets filled in, and the secret values used (to keep them out of the output). */
async function prepareHeaders(
  settings: Pick<HttpWith, 'headers'>,
  named: [string, string][],
  hasBody: boolean,
  step: StepRequest,
  readSecrets: (workspaceId: string, names: readonly string[]) => Promise<Map<string, string>>,
): Promise<{ headers: Record<string, string>; secretValues: string[] }> {
  const names = secretNamesIn(...named.map(([, value]) => value));
  const values = names.length > 0 ? await readSecrets(step.run.workspaceId, names) : new Map<string, string>();
  const missing = names.filter((name) => !values.has(name));
  if (missing.length > 0) {
    throw new StepFailure(`http: ${missing.length === 1 ? 'secret' : 'secrets'} ${missing.join(', ')} not set in this workspace (carepath admin secret set)`);
  }
  const secretHeaders = Object.fromEntries(named.map(([name, value]) => [name, fillSecrets(value, values)]));
  const headers = requestHeaders(settings, step.stepKey, secretHeaders);
  if (hasBody) headers['content-type'] ??= 'application/json';
  return { headers, secretValues: [...values.values()] };
}

function requestHeaders(settings: Pick<HttpWith, 'headers'>, stepKey: string, secretHeaders: Record<string, string>): Record<string, string> {
  const headers: Record<string, string> = {};
  // Lower-cased names, so a header given twice in other cases is one header.
  for (const [name, value] of Object.entries({ ...settings.headers, ...secretHeaders })) headers[name.toLowerCase()] = String(value);
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

/**
 * `{status, body}`: the body parsed when it is JSON, else its text; null when empty. A secret
 * the call sent that comes back in the body (a partner echoing the request) reads `[secret]`,
 * in whatever form it comes back (redact-secrets.ts).
 */
function outputOf(answer: OutboundAnswer, secrets: readonly string[]): { status: number; body: unknown; truncated?: true } {
  const forms = secretForms(secrets);
  const text = redactText(answer.body, forms, answer.truncated);
  let body: unknown = text === '' ? null : text;
  if (text !== '' && !answer.truncated) {
    try {
      body = redactValue(JSON.parse(text), forms);
    } catch {
      // Not JSON: keep the text.
    }
  }
  return answer.truncated ? { status: answer.status, body, truncated: true } : { status: answer.status, body };
}

/** The step's output is the partner's answer; a proxy's error page is none. */
function failed(step: StepRequest, message: string, answer: OutboundAnswer | null, answerOutput: (answer: OutboundAnswer) => unknown): StepResult {
  return {
    outcome: 'failed',
    output: answer && !answer.fromProxy ? answerOutput(answer) : null,
    end: { status: 'errored', nodeId: step.nodeId, message },
  };
}

