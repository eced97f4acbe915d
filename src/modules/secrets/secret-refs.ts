/**
 * `${secrets.NAME}`: how a blueprint names a workspace secret in an `http` automation's header
 * (`"authorization": "Bearer ${secrets.LAB_PARTNER_TOKEN}"`). The blueprint, its runs, the
 * graph the API shows and an export carry the name only; the value is filled in as the call is
 * made. Pure text functions: validation at import and the engine share them.
 */

/** Names: an environment-variable look, so they read as settings, not data. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

// A fresh object per use: a global RegExp carries lastIndex, which must not be shared.
const referencePattern = () => /\$\{secrets\.([^}]*)\}/g;

/** Where a text mentions secrets at all (a well-formed reference or not). */
export function mentionsSecrets(text: string): boolean {
  return text.includes('${secrets.');
}

/** The names the texts refer to, in order, each once; names that are not well-formed are returned too (to be reported). */
export function secretNamesIn(...texts: string[]): string[] {
  return [...new Set(texts.flatMap((text) => [...text.matchAll(referencePattern())].map((match) => match[1])))];
}

/** The text with every reference replaced by its value; `values` must hold every name. */
export function fillSecrets(text: string, values: ReadonlyMap<string, string>): string {
  return text.replace(referencePattern(), (_whole, name: string) => values.get(name)!);
}
