/**
 * A partner that echoes the request it got (a debugging endpoint, an error page quoting the
 * headers) hands the call's secrets back in its answer, which becomes the step's output, readable
 * with `runs:read`. These forms of a secret read `[secret]`: as sent; as JSON writes it (in the
 * parsed answer any escape; in its text `\"`, `\\`, `\/` and `\u00e9` for what is beyond
 * ASCII); percent-encoded as `encodeURIComponent` does (upper- or lower-case hex); and a secret
 * cut off by the answer's size cap (its start at the very end). Other encodings (base64, a
 * partial percent-encoding) are not recognised: secrets are meant to go to partners trusted with them.
 */

export const REDACTED = '[secret]';

/** Secrets shorter than this are not looked for in answers: replacing them would garble text. */
export const MIN_REDACTED_SECRET = 8;

/** Of a cut-off secret, the shortest start that is still taken out. */
const MIN_CUT_SECRET = 4;

/** The forms a secret can take in an answer's text, longest secrets first (one may contain another). */
export function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret.length < MIN_REDACTED_SECRET) continue;
    const json = JSON.stringify(secret).slice(1, -1);
    const percent = encodeURIComponent(secret);
    for (const form of [secret, json, json.replaceAll('/', '\\/'), asciiJson(secret), percent, percent.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase())]) forms.add(form);
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** The text with every form of a secret replaced; `cut`: the text ends where a cap cut it. */
export function redactText(text: string, forms: readonly string[], cut: boolean): string {
  let out = text;
  for (const form of forms) out = out.split(form).join(REDACTED);
  if (!cut) return out;
  // The cap may have fallen inside a secret: its start is at the end of the text.
  for (const form of forms) {
    for (let length = Math.min(form.length - 1, out.length); length >= MIN_CUT_SECRET; length--) {
      if (out.endsWith(form.slice(0, length))) return `${out.slice(0, -length)}${REDACTED}`;
    }
  }
  return out;
}

/** Every string in a parsed answer (keys too) with the secrets in it replaced. */
export function redactValue(value: unknown, forms: readonly string[]): unknown {
  if (typeof value === 'string') return redactText(value, forms, false);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, forms));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [redactText(key, forms, false), redactValue(item, forms)]));
  }
  return value;
}

/** JSON text of a string with everything beyond ASCII as `\uXXXX` (how some servers write JSON). */
function asciiJson(secret: string): string {
  return JSON.stringify(secret)
    .slice(1, -1)
    .replace(/[\u0080-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
