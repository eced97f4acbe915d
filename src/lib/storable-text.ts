/**
 * Values both stores keep as sent.
 *
 * Text: PostgreSQL's `text` cannot hold the character U+0000, and its JSON reader refuses an
 * unpaired UTF-16 surrogate (`\ud800` alone); SQLite keeps both. A value holding either used to
 * pass validation, then fail on PostgreSQL as a 500 (an API call) or as a delivery that failed
 * for good after its 202; so requests and delivered resources that hold one are refused up
 * front, on both stores alike, naming where.
 *
 * Numbers: JSON has no bound on a number, a double has (about ±1.8e308). `JSON.parse` reads
 * `1e400` as Infinity, which no JSON text can hold: `JSON.stringify` writes it as `null`, and
 * canonical JSON throws. A fire with `{"n": 1e400}` was a 500 with an Idempotency-Key and,
 * without one, a run whose payload said `null`; a delivered Observation with such a value was
 * applied with the value gone, and a "value above 8" check saw none (an integration review). So
 * such a number is refused like unstorable text, naming where.
 *
 * Valid JSON text cannot hold U+0000 or a lone surrogate raw (control characters must be escaped,
 * and a body is read as UTF-8, which has no surrogates): only the escapes `\u0000` and
 * `\ud800`–`\udfff` make them. A number beyond a double needs an exponent of three digits or a
 * long run of digits. `mayHoldUnstorableText` looks for those in the text, so a parsed value is
 * walked only when its text had one: most never are.
 */

/** An escape for U+0000 or a surrogate (paired ones too, such as an escaped emoji): worth a walk. */
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Digits with an exponent of three digits or more, or a hundred digits in a row: what a number
 * beyond a double needs (1e308 is a double, 10e308 is not; 300 digits with an exponent of 10 are
 * not either). Ids match it too (`urn:uuid:1e234567-…`, about one Synthea resource in three),
 * so each match is looked at in place: worth a walk only when it is a number of the JSON text.
 * The scan costs about 0.3 ms per 300 KB of text (a Synthea bundle of 300 resources), a third
 * of parsing it.
 */
const DIGITS_OF_A_HUGE_NUMBER = /\d(?:[eE]\+?\d{3}|\d{99})/g;

export function mayHoldUnstorableText(jsonText: string): boolean {
  return SUSPECT_ESCAPE.test(jsonText) || mayHoldHugeNumber(jsonText);
}

function mayHoldHugeNumber(text: string): boolean {
  DIGITS_OF_A_HUGE_NUMBER.lastIndex = 0;
  for (let match = DIGITS_OF_A_HUGE_NUMBER.exec(text); match !== null; match = DIGITS_OF_A_HUGE_NUMBER.exec(text)) {
    const end = jsonNumberEndingAt(text, match.index);
    if (end === -1) return true;
    // The next look starts after this run of number characters: each character is looked at a
    // bounded number of times. Resumed inside the run, a 1 MiB string such as "1e1111e1111…"
    // was walked once per match, minutes of the serving thread (a code review).
    DIGITS_OF_A_HUGE_NUMBER.lastIndex = Math.max(DIGITS_OF_A_HUGE_NUMBER.lastIndex, end);
  }
  return false;
}

const isNumberCharacter = (code: number) => (code >= 0x30 && code <= 0x39) || code === 0x2e || code === 0x2d || code === 0x2b || code === 0x65 || code === 0x45;
const isSpace = (code: number) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;

/**
 * -1 when the run of number characters around `at` is a value of the JSON text: after `:`, `,`
 * or `[` and before `,`, `}` or `]` (white space aside), not the inside of a string (a string
 * that holds exactly such text, `"a:1e400]"`, passes too, and costs only the walk); otherwise
 * where the run ends. The run is read backwards only from `at`, which a caller never sets
 * inside a run it was told the end of.
 */
function jsonNumberEndingAt(text: string, at: number): number {
  let start = at;
  while (start > 0 && isNumberCharacter(text.charCodeAt(start - 1))) start--;
  let end = at;
  while (end < text.length && isNumberCharacter(text.charCodeAt(end))) end++;
  const runEnd = end;
  while (start > 0 && isSpace(text.charCodeAt(start - 1))) start--;
  while (end < text.length && isSpace(text.charCodeAt(end))) end++;
  const before = start > 0 ? text[start - 1] : '';
  const after = end < text.length ? text[end] : '';
  const isValue = (before === ':' || before === ',' || before === '[') && (after === ',' || after === '}' || after === ']');
  return isValue ? -1 : runEnd;
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
  const found = unstorablePath(value, path);
  if (found === null) return null;
  return `${found.path} ${found.number ? UNSTORABLE_NUMBER : UNSTORABLE_TEXT}`;
}

/**
 * The path of the first string (or object key) in `value` that is unstorable, or of the first
 * number beyond a double, such as `body.name` or `body.payload.items[2]`; null when there is none.
 */
function unstorablePath(value: unknown, path: string): { path: string; number: boolean } | null {
  if (typeof value === 'string') return isUnstorable(value) ? { path, number: false } : null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : { path, number: true };
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorablePath(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (isUnstorable(key)) return { path: `${path} (a field name)`, number: false };
      const found = unstorablePath(item, `${path}.${key}`);
      if (found !== null) return found;
    }
  }
  return null;
}

const UNSTORABLE_TEXT = 'holds the character U+0000 or an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text that can be stored';
const UNSTORABLE_NUMBER = 'is a number beyond what a double holds (±1.8e308), which would be stored as null: send a smaller number, or the value as a string';
