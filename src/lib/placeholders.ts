/**
 * `{{ <FHIRPath> }}` placeholders inside the string values of an automation's `with` (DESIGN §6).
 * Only string values are looked at, never object keys. This file knows nothing of FHIRPath
 * itself: the caller passes the evaluator, so the same code serves validation and the engine.
 */

/** Evaluates one placeholder's expression text to a FHIRPath collection. */
export type EvaluateText = (expression: string) => unknown[];

// Non-greedy, so "{{a}} and {{b}}" is two placeholders; [\s\S] lets an expression span lines.
// A fresh object per use: a global RegExp carries lastIndex, which must not be shared.
const placeholderPattern = () => /\{\{([\s\S]*?)\}\}/g;

/** The expression text (trimmed) of every placeholder, depth first, in document order. */
export function findPlaceholders(value: unknown): string[] {
  if (typeof value === 'string') {
    return [...value.matchAll(placeholderPattern())].map((match) => match[1].trim());
  }
  if (Array.isArray(value)) return value.flatMap(findPlaceholders);
  if (isObject(value)) return Object.values(value).flatMap(findPlaceholders);
  return [];
}

/**
 * A deep copy of `value` with every placeholder filled in.
 * - A string that is exactly one placeholder becomes the value itself, so a number stays a
 *   number and an object an object: one item is unwrapped, none gives null, several an array.
 * - A placeholder inside longer text is replaced by the value's text: strings as they are,
 *   numbers and Booleans as written, objects as JSON, none as '', several joined with ','
 *   (an expression can call `join()` to choose another separator).
 */
export function renderPlaceholders(value: unknown, evaluateText: EvaluateText): unknown {
  if (typeof value === 'string') return renderString(value, evaluateText);
  if (Array.isArray(value)) return value.map((item) => renderPlaceholders(item, evaluateText));
  if (isObject(value)) {
    // fromEntries defines own properties, so a "__proto__" key is copied as a key.
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, renderPlaceholders(item, evaluateText)]),
    );
  }
  return value;
}

function renderString(text: string, evaluateText: EvaluateText): unknown {
  const matches = [...text.matchAll(placeholderPattern())];
  if (matches.length === 0) return text;
  if (matches.length === 1 && matches[0][0] === text) {
    return asValue(evaluateText(matches[0][1].trim()));
  }
  return text.replace(placeholderPattern(), (_whole, expression: string) =>
    asText(evaluateText(expression.trim())),
  );
}

/**
 * A text template filled in as text, even when it is one placeholder alone (a header value):
 * each placeholder by the in-text rule of `renderPlaceholders`, so an object is its JSON and
 * nothing is ''.
 */
export function renderTextTemplate(text: string, evaluateText: EvaluateText): string {
  return text.replace(placeholderPattern(), (_whole, expression: string) => asText(evaluateText(expression.trim())));
}

/**
 * A URL template filled in: placeholders in the scheme and host are filled as written (the
 * outbound allow-list judges the host that results), with what a scheme, host name, address or
 * port is made of only (letters, digits, `.`, `-`, `_`, `:`, `[`, `]`), and every placeholder
 * after the host, in the path, query or fragment, is percent-encoded as one component
 * (`encodeURIComponent`). So `/patients/{{ payload.id }}/notify?note={{ payload.note }}` stays
 * that path whatever the values hold: `../admin?all=1#` becomes `..%2Fadmin%3Fall%3D1%23`, not
 * another endpoint; and `https://{{ payload.site }}.lab.example/` stays a host under
 * lab.example: a site of `127.0.0.1:8080/x?` would have made the host 127.0.0.1 and the rest a
 * query (a security review, 2026-11-28). A template that is one placeholder alone (the whole URL
 * from data) is filled as written.
 */
export function renderUrlTemplate(template: string, evaluateText: EvaluateText): unknown {
  const matches = [...template.matchAll(placeholderPattern())];
  if (matches.length === 0) return template;
  if (matches.length === 1 && matches[0][0] === template) return asValue(evaluateText(matches[0][1].trim()));
  const hostEnds = pathStartOf(template, matches);
  const filled = template.replace(placeholderPattern(), (whole, expression: string, offset: number) => {
    const text = asText(evaluateText(expression.trim()));
    if (offset >= hostEnds) return encodeURIComponent(text);
    if (!HOST_PART.test(text)) {
      throw new UrlTemplateError('a placeholder before the path was filled with characters a scheme, host or port cannot hold (only letters, digits and . - _ : [ ] may fill it)');
    }
    return text;
  });
  // `.` and `..` survive encoding (and `%2e` is read as a dot too): as a whole path segment they
  // would climb out of the path the blueprint wrote, once a URL parser resolves them.
  if (dotSegmentIn(filled)) throw new UrlTemplateError('a placeholder filled a path segment with "." or ".." (it would change the path)');
  return filled;
}

/** What a placeholder before the path may be filled with: parts of a scheme, host name, IP address or port. */
const HOST_PART = /^[A-Za-z0-9._:[\]-]*$/;

/** A URL template whose filled value would not be the URL its template meant. */
export class UrlTemplateError extends Error {}

/** `scheme://` at the start of a URL. */
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

function dotSegmentIn(url: string): boolean {
  const scheme = SCHEME.exec(url);
  const afterHost = scheme ? url.slice(scheme[0].length).replace(/^[^/?#]*/, '') : url;
  const path = afterHost.split(/[?#]/)[0];
  return path.split('/').some((segment) => /^(\.|%2e){1,2}$/i.test(segment));
}

/** Where the path (or query, or fragment) of a URL template starts: its first `/`, `?` or `#` after `scheme://`, outside placeholders. */
function pathStartOf(template: string, placeholders: RegExpExecArray[] | RegExpMatchArray[]): number {
  const insidePlaceholder = (i: number) => placeholders.some((m) => i >= m.index! && i < m.index! + m[0].length);
  const scheme = SCHEME.exec(template);
  for (let i = scheme ? scheme[0].length : 0; i < template.length; i++) {
    if ('/?#'.includes(template[i]) && !insidePlaceholder(i)) return i;
  }
  return template.length;
}

function asValue(items: unknown[]): unknown {
  if (items.length === 0) return null;
  return items.length === 1 ? items[0] : items;
}

function asText(items: unknown[]): string {
  return items.map(itemText).join(',');
}

function itemText(item: unknown): string {
  if (item === null || item === undefined) return '';
  if (typeof item === 'object') return JSON.stringify(item);
  return String(item);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
