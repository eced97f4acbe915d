/**
 * Text both stores keep as sent. PostgreSQL's `text` cannot hold the character U+0000, and its
 * JSON reader refuses an unpaired UTF-16 surrogate (`\ud800` alone); SQLite keeps both. A value
 * holding either used to pass validation, then fail on PostgreSQL as a 500 (an API call) or as a
 * delivery that failed for good after its 202; so requests and delivered resources that hold one
 * are refused up front, on both stores alike, naming where.
 *
 * Valid JSON text cannot hold U+0000 or a lone surrogate raw (control characters must be escaped,
 * and a body is read as UTF-8, which has no surrogates): only the escapes `\u0000` and
 * `\ud800`–`\udfff` make them. `mayHoldUnstorableText` looks for those in the text, so a parsed
 * value is walked only when its text had one: most never are.
 */

/** An escape for U+0000 or a surrogate (paired ones too, such as an escaped emoji): worth a walk. */
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

export function mayHoldUnstorableText(jsonText: string): boolean {
  return SUSPECT_ESCAPE.test(jsonText);
}

/** U+0000, a high surrogate not followed by a low one, or a low one not after a high one. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when the string holds U+0000 or an unpaired surrogate. */
function isUnstorable(text: string): boolean {
  return UNSTORABLE.test(text);
}

/**
 * The text with each U+0000 and unpaired surrogate replaced by U+FFFD, for text the service
 * writes itself from what others sent (a step's error quoting a partner's answer or a filled
 * message): refusing it is not an option there, and PostgreSQL refused the write, so the run's
 * step could never be recorded and was retried for ever.
 */
export function storableText(text: string): string {
  return UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\uFFFD') : text;
}

const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/**
 * What is wrong with `value`, named by its place (`body.payload.notes[1] holds the character
 * U+0000 …`), when a string or object key in it is unstorable; null when none is.
 */
export function unstorableTextProblem(value: unknown, path: string): string | null {
  const found = unstorableTextPath(value, path);
  return found === null ? null : `${found} ${UNSTORABLE_TEXT}`;
}

/**
 * The path of the first string (or object key) in `value` that is unstorable, such as
 * `body.name` or `body.payload.items[2]`; null when there is none.
 */
function unstorableTextPath(value: unknown, path: string): string | null {
  if (typeof value === 'string') return isUnstorable(value) ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableTextPath(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (isUnstorable(key)) return `${path} (a field name)`;
      const found = unstorableTextPath(item, `${path}.${key}`);
      if (found !== null) return found;
    }
  }
  return null;
}

const UNSTORABLE_TEXT = 'holds the character U+0000 or an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text that can be stored';
