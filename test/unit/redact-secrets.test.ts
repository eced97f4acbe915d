import { describe, expect, it } from 'vitest';
import { REDACTED, redactText, redactValue, secretForms } from '../../src/engine/automations/redact-secrets.js';

describe('secrets in an echoed answer', () => {
  const secret = 'ab"cd\\ef/gh-é123456';
  const forms = secretForms([secret]);

  it('are taken out as sent, JSON-escaped (with or without \\/, \\u escapes) and percent-encoded', () => {
    const json = JSON.stringify(secret).slice(1, -1);
    const percent = encodeURIComponent(secret);
    for (const form of [secret, json, json.replace('/', '\\/'), json.replace('é', '\\u00e9'), percent, percent.toLowerCase()]) {
      expect(redactText(`before ${form} after`, forms, false), form).toBe(`before ${REDACTED} after`);
    }
  });

  it('are taken out of every string of a parsed answer, keys included', () => {
    const parsed = JSON.parse(JSON.stringify({ headers: { authorization: `Bearer ${secret}` }, [secret]: [secret] }));
    expect(redactValue(parsed, forms)).toEqual({ headers: { authorization: `Bearer ${REDACTED}` }, [REDACTED]: [REDACTED] });
  });

  it('are taken out when the answer was cut inside one (its start at the end), not when the text merely ends alike', () => {
    expect(redactText('x'.repeat(10) + 'Bearer ab"cd\\ef', forms, true)).toBe(`${'x'.repeat(10)}Bearer ${REDACTED}`);
    expect(redactText('ends with ab"c', forms, false)).toBe('ends with ab"c');
    // Three characters could be anything.
    expect(redactText('ends with ab"', forms, true)).toBe('ends with ab"');
  });

  it('take the longer of two secrets first, and leave short ones alone', () => {
    const both = secretForms(['token-1234', 'token-1234-extended', 'short']);
    expect(redactText('token-1234-extended and token-1234 and short', both, false)).toBe(`${REDACTED} and ${REDACTED} and short`);
  });
});
