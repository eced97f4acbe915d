/**
 * The `with` of each automation type (DESIGN §6). Each check reports problems through `report`,
 * which already carries the place (`node "flag": automation "tag-it"`), and names the field.
 *
 * Any string value may hold `{{ }}` placeholders (DESIGN §6). At import such a value is checked
 * for its expressions only (its own format is known when the step runs); when the step runs, the
 * engine fills it and checks the filled settings with the same rules (`settingsProblems`), and a
 * value that breaks them errors the run at that node.
 */
import { IANAZone } from 'luxon';
import { forwardDuration } from '../../lib/iso-duration.js';
import { findPlaceholders, renderPlaceholders } from '../../lib/placeholders.js';
import { isServiceSetHeader, serviceSetHeaderProblem } from '../../lib/service-set-headers.js';
import { HTTP_METHODS, TAG_SLUG, type AutomationType } from './blueprint.js';
import { expressionProblem } from './expression.check.js';
import { eventNameProblem, subjectlessEventProblem } from '../../ingestion/events.js';
import { SECRET_NAME, mentionsSecrets, secretNamesIn } from '../secrets/secret-refs.js';

export type Report = (problem: string) => void;
type WithObject = Record<string, unknown>;

const EVENT_NAME = /^[A-Za-z]{1,64}\.[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const LOCAL_TIME = /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$/;
const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * What Node refuses in a header value (and what would split one header into two, were it sent):
 * refused at import when written, rather than at every run's call. What placeholders fill in is
 * checked when the call is made.
 */
const HEADER_VALUE_UNSENDABLE = /[^\t\x20-\x7e\x80-\xff]/;
const PLACEHOLDERS = /\{\{[\s\S]*?\}\}/g;
const MAX_HTTP_TIMEOUT_MS = 60_000;

/** A value whose placeholders are filled when the step runs: its format is checked then. */
const deferred = (value: unknown): boolean => typeof value === 'string' && value.includes('{{');

const FIELDS: Record<AutomationType, readonly string[]> = {
  wait: ['duration', 'until', 'timezone'],
  wait_for_event: ['event', 'timeout'],
  tag: ['target', 'add', 'remove'],
  set: ['vars'],
  http: ['method', 'url', 'headers', 'body', 'timeoutMs'],
  start_pathway: ['triggerId', 'payload'],
  fail: ['message'],
  stop: [],
  cancel: [],
};

/** The fields whose value must match a format (checked once filled, when the step runs). */
const FORMATTED_FIELDS: Record<AutomationType, readonly string[]> = {
  wait: ['duration', 'until', 'timezone'],
  wait_for_event: ['event', 'timeout'],
  tag: ['target', 'add', 'remove'],
  set: [],
  http: ['method', 'timeoutMs'],
  start_pathway: ['triggerId'],
  fail: [],
  stop: [],
  cancel: [],
};

const CHECKS: Record<AutomationType, (w: WithObject, report: Report) => void> = {
  wait: checkWait,
  wait_for_event: checkWaitForEvent,
  tag: checkTag,
  set: checkSet,
  http: checkHttp,
  start_pathway: checkStartPathway,
  fail: checkFail,
  stop: () => {},
  cancel: () => {},
};

/** `withValue` is the raw `with` (undefined when absent). */
export function checkAutomationWith(type: AutomationType, withValue: unknown, report: Report): void {
  if (withValue === undefined) {
    if (FIELDS[type].length > 0) report(`with is required for a ${type} automation`);
    return;
  }
  if (!isObject(withValue)) {
    report('with must be an object');
    return;
  }
  for (const key of Object.keys(withValue)) {
    if (!FIELDS[type].includes(key)) {
      report(
        FIELDS[type].length === 0
          ? `with must be empty for a ${type} automation, found "${key}"`
          : `with: unknown field "${key}" for a ${type} automation`,
      );
    }
  }
  CHECKS[type](withValue, report);
  checkPlaceholders(withValue, 'with', report);
  checkSecretMentions(type, withValue, report);
}

/** What is wrong with an automation's settings once its placeholders are filled (the engine asks when the step runs). */
export function settingsProblems(type: AutomationType, filled: unknown): string[] {
  const problems: string[] = [];
  if (!isObject(filled)) return ['with must be an object'];
  // The checks pass over `{{` as a placeholder still to fill; filled, there is none left, so a
  // field with a format whose value brought `{{` with it is refused rather than passed over
  // unchecked. (Free text, a body or a payload, may hold braces.)
  for (const field of FORMATTED_FIELDS[type]) {
    eachString(filled[field], `with.${field}`, (text, path) => {
      if (text.includes('{{')) problems.push(`${path} may not hold {{`);
    });
  }
  if (problems.length > 0) return problems;
  CHECKS[type](filled, (problem) => problems.push(problem));
  return problems;
}

function checkWait(w: WithObject, report: Report): void {
  const byDuration = w.duration !== undefined;
  const byClock = w.until !== undefined || w.timezone !== undefined;
  if (byDuration && byClock) {
    report('with must have either duration or until with timezone, not both');
  } else if (!byDuration && !byClock) {
    report('with needs duration, or until with timezone');
  }
  if (byDuration) checkDuration(w.duration, 'with.duration', report);
  if (!byClock) return;
  if (w.until === undefined) report('with.until is required with timezone');
  else if (!deferred(w.until) && (typeof w.until !== 'string' || !LOCAL_TIME.test(w.until))) {
    report(`with.until must be a local time HH:MM or HH:MM:SS, got ${show(w.until)}`);
  }
  if (w.timezone === undefined) report('with.timezone is required with until');
  else if (!deferred(w.timezone) && (typeof w.timezone !== 'string' || !IANAZone.isValidZone(w.timezone))) {
    report(`with.timezone must be an IANA time zone such as Europe/Paris, got ${show(w.timezone)}`);
  }
}

function checkWaitForEvent(w: WithObject, report: Report): void {
  if (deferred(w.event)) {
    // Known when the step runs.
  } else if (typeof w.event !== 'string' || !EVENT_NAME.test(w.event)) {
    report(`with.event must be an event name such as Encounter.finished, got ${show(w.event)}`);
  } else {
    // A wait on an event carepath never raises would only ever end by its timeout.
    const problem = eventNameProblem(w.event);
    const subjectless = problem ? null : subjectlessEventProblem(w.event);
    if (problem) report(`with.event ${problem}`);
    // A wait wakes on an event for its run's subject: one raised for no subject never comes.
    else if (subjectless) report(`with.event ${subjectless}, so it never wakes a wait; a trigger on it starts runs`);
  }
  if (w.timeout !== undefined) checkDuration(w.timeout, 'with.timeout', report);
}

function checkTag(w: WithObject, report: Report): void {
  if (w.target !== 'subject' && w.target !== 'pathway' && !deferred(w.target)) {
    report(`with.target must be "subject" or "pathway", got ${show(w.target)}`);
  }
  if (w.add === undefined && w.remove === undefined) {
    report('with needs add or remove');
    return;
  }
  const add = checkSlugList(w.add, 'with.add', report);
  const remove = checkSlugList(w.remove, 'with.remove', report);
  // A list left out is empty: `add: []` alone changes nothing, as `add: [], remove: []` does.
  const given = [w.add, w.remove].filter((list) => list !== undefined);
  if (given.every((list) => Array.isArray(list)) && add.length + remove.length === 0) {
    const only = w.add !== undefined ? 'add' : 'remove';
    report(
      given.length === 2
        ? 'with.add and with.remove are both empty'
        : `with.${only} is empty (and the other list left out): the step would change nothing`,
    );
  }
  for (const tag of add.filter((t) => remove.includes(t) && !deferred(t))) {
    report(`with: tag "${tag}" is both added and removed`);
  }
}

function checkSet(w: WithObject, report: Report): void {
  if (!isObject(w.vars)) {
    report('with.vars must be an object of variable name → FHIRPath expression');
    return;
  }
  const entries = Object.entries(w.vars);
  if (entries.length === 0) report('with.vars must set at least one variable');
  for (const [name, expression] of entries) {
    if (!VAR_NAME.test(name)) {
      report(`with.vars: "${name}" is not a valid variable name (letters, digits and _, not first a digit)`);
    }
    if (typeof expression !== 'string' || expression.trim() === '') {
      report(`with.vars.${name} must be a FHIRPath expression`);
      continue;
    }
    const problem = expressionProblem(expression);
    if (problem) report(`with.vars.${name} ${problem}`);
  }
}

function checkHttp(w: WithObject, report: Report): void {
  if (!deferred(w.method) && (typeof w.method !== 'string' || !(HTTP_METHODS as readonly string[]).includes(w.method))) {
    report(`with.method must be one of ${HTTP_METHODS.join(', ')}, got ${show(w.method)}`);
  }
  if (typeof w.url !== 'string' || !isHttpUrl(w.url)) {
    report('with.url must be an http or https URL');
  }
  if (w.headers !== undefined) {
    if (!isObject(w.headers)) report('with.headers must be an object of header name → text');
    else {
      for (const [name, value] of Object.entries(w.headers)) {
        if (!HEADER_NAME.test(name)) report(`with.headers: "${name}" is not a valid header name`);
        else if (isServiceSetHeader(name)) report(serviceSetHeaderProblem(name));
        if (typeof value !== 'string') report(`with.headers.${name} must be text`);
        else if (HEADER_VALUE_UNSENDABLE.test(value.replace(PLACEHOLDERS, ''))) {
          report(`with.headers.${name} holds a character a header cannot carry (a line break, a control character, or one beyond U+00FF)`);
        }
      }
    }
  }
  const timeout = w.timeoutMs;
  if (
    timeout !== undefined &&
    !deferred(timeout) &&
    !(Number.isInteger(timeout) && (timeout as number) >= 1 && (timeout as number) <= MAX_HTTP_TIMEOUT_MS)
  ) {
    report(`with.timeoutMs must be a whole number from 1 to ${MAX_HTTP_TIMEOUT_MS}`);
  }
}

function checkStartPathway(w: WithObject, report: Report): void {
  if (!deferred(w.triggerId) && (typeof w.triggerId !== 'string' || !UUID.test(w.triggerId))) {
    report(`with.triggerId must be a trigger id (a UUID), got ${show(w.triggerId)}`);
  }
}

function checkFail(w: WithObject, report: Report): void {
  if (typeof w.message !== 'string' || w.message.trim() === '') {
    report('with.message must be a non-empty text');
  }
}

function checkDuration(value: unknown, field: string, report: Report): void {
  if (deferred(value)) return;
  if (typeof value !== 'string' || !forwardDuration(value)) {
    report(`${field} must be an ISO 8601 duration longer than zero with no negative part, such as PT1M or P2D, got ${show(value)}`);
  }
}

function checkSlugList(value: unknown, field: string, report: Report): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    report(`${field} must be a list of tags`);
    return [];
  }
  value.forEach((tag, index) => {
    if (!deferred(tag) && (typeof tag !== 'string' || !TAG_SLUG.test(tag))) {
      report(`${field}[${index}] must be a tag slug (lower-case letters, digits, . _ : -), got ${show(tag)}`);
    }
  });
  return value.filter((tag): tag is string => typeof tag === 'string');
}

/** Placeholders stand for values known only when the step runs; the rest of the URL must hold. */
function isHttpUrl(text: string): boolean {
  const filled = String(renderPlaceholders(text, () => ['x']));
  if (!URL.canParse(filled)) return false;
  const { protocol, hostname } = new URL(filled);
  return (protocol === 'http:' || protocol === 'https:') && hostname !== '';
}

/** Calls `visit` with every string value inside `value` and its path (`with.body.note`, `with.add[0]`). */
function eachString(value: unknown, path: string, visit: (text: string, path: string) => void): void {
  if (typeof value === 'string') visit(value, path);
  else if (Array.isArray(value)) value.forEach((item, index) => eachString(item, `${path}[${index}]`, visit));
  else if (isObject(value)) for (const [key, item] of Object.entries(value)) eachString(item, `${path}.${key}`, visit);
}

/** Every `{{ }}` in every string under `with` must be an expression that could run. */
function checkPlaceholders(value: unknown, path: string, report: Report): void {
  eachString(value, path, (text, at) => {
    for (const expression of findPlaceholders(text)) {
      if (expression === '') {
        report(`${at}: placeholder {{ }} is empty`);
        continue;
      }
      const problem = expressionProblem(expression);
      if (problem) report(`${at}: placeholder {{ ${expression} }} ${problem}`);
    }
  });
}

/**
 * `${secrets.NAME}` (modules/secrets/secret-refs.ts) goes in an http automation's header values
 * only, with well-formed names, and such a header holds no placeholders: it is sent as written
 * with the values filled in, so no data can ever name a secret, and no secret can land in a
 * body, a URL or a variable that a run keeps and the API shows. And the URL of an automation
 * that sends a secret names its scheme, host and port as written: a placeholder there would let
 * a fire's payload or a delivered resource choose where the secret goes.
 */
function checkSecretMentions(type: AutomationType, withValue: WithObject, report: Report): void {
  let sendsSecret = false;
  eachString(withValue, 'with', (text, path) => {
    if (!mentionsSecrets(text)) return;
    sendsSecret = true;
    if (type !== 'http' || !/^with\.headers\.[^.[]+$/.test(path)) {
      report(`${path}: secrets (\${secrets.NAME}) may be used in http headers only`);
      return;
    }
    const names = secretNamesIn(text);
    if (names.length === 0) report(`${path}: write a secret as \${secrets.NAME}`);
    for (const name of names) {
      if (!SECRET_NAME.test(name)) report(`${path}: "${name}" is not a secret name (letters, digits and _, up to 64, not starting with a digit)`);
    }
    if (findPlaceholders(text).length > 0) report(`${path}: a header that names a secret takes no {{ }} placeholders`);
  });
  if (sendsSecret && type === 'http' && typeof withValue.url === 'string') {
    const origin = /^https?:\/\/[^/?#]*/i.exec(withValue.url)?.[0] ?? '';
    if (origin === '' || origin.includes('{{')) {
      report('with.url: an http automation that sends a secret must name its host as written, with {{ }} placeholders only after it (in the path or query), so no run\'s data can choose where the secret goes');
    }
  }
}

function isObject(value: unknown): value is WithObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function show(value: unknown): string {
  return value === undefined ? 'nothing' : JSON.stringify(value);
}
