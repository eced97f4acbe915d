import { describe, expect, it } from 'vitest';
import { mayHoldUnstorableText, unstorableTextProblem } from '../../src/lib/storable-text.js';

describe('values no store keeps as sent', () => {
  it('finds numbers beyond a double in the text, and only numbers of the JSON text', () => {
    for (const text of ['{"n":1e400}', '{"n": -1E+400 }', '{"a":[1e308]}', '{"a":[1,\n 2.5e999\n]}', `{"n":${'9'.repeat(320)}}`, `{"n":${'1'.repeat(250)}e99}`]) {
      expect(mayHoldUnstorableText(text), text.slice(0, 40)).toBe(true);
    }
    // Ids, strings and small exponents are no reason to walk a body.
    for (const text of ['{"n":1.5,"s":"e12"}', '{"u":"urn:uuid:1e234567-89ab-7cde-8f01-23456789abcd"}', '{"u":"5e123"}', '{"n":-0.5e-400}', '{"n":1e99}']) {
      expect(mayHoldUnstorableText(text), text).toBe(false);
    }
  });

  it('looks at each character a bounded number of times: a 1 MiB string of exponents takes milliseconds, not minutes', () => {
    const text = `{"s":"${'1e111'.repeat(200_000)}"}`;
    const started = performance.now();
    expect(mayHoldUnstorableText(text)).toBe(false);
    // Quadratic, this was about 2e11 steps; linear, a few milliseconds. The bound is loose for slow machines.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(mayHoldUnstorableText(`{"s":"${'1e111'.repeat(1_000)}", "n": 1e400}`)).toBe(true);
  });

  it('names the place of a number beyond a double, or of unstorable text, in a parsed value', () => {
    expect(unstorableTextProblem(JSON.parse('{"payload": {"values": [1, 1e400]}}'), 'body')).toMatch(/^body\.payload\.values\[1\] is a number beyond what a double holds/);
    expect(unstorableTextProblem(JSON.parse('{"a": -1e400}'), 'body')).toMatch(/^body\.a is a number beyond/);
    expect(unstorableTextProblem(JSON.parse('{"a": "x\\u0000"}'), 'body')).toMatch(/^body\.a holds the character U\+0000/);
    expect(unstorableTextProblem(JSON.parse('{"a": 1.7976931348623157e308, "b": 1e-400}'), 'body')).toBeNull();
  });
});
