import { describe, expect, it } from 'vitest';
import { refuseOtherCharsets, utf8TextOf } from '../../src/lib/utf8-text.js';
import { ApiError } from '../../src/lib/errors.js';

const refusal = (contentType: string): string | null => {
  try {
    refuseOtherCharsets(contentType);
    return null;
  } catch (error) {
    return (error as ApiError).code;
  }
};

describe('UTF-8 bodies', () => {
  it('takes no charset, or UTF-8 however it is spelled and quoted', () => {
    for (const contentType of ['application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF8', 'application/json; charset="utf-8"', 'application/fhir+json; fhirVersion=4.0; charset=utf-8']) {
      expect(refusal(contentType), contentType).toBeNull();
    }
  });

  it('reads the charset from the parameters: not from inside another quoted value; twice is refused whatever the order', () => {
    expect(refusal('application/json; foo="a;charset=latin1"')).toBeNull();
    expect(refusal('application/json; charset=latin1')).toBe('unsupported_media_type');
    expect(refusal('application/json; charset=utf-8; charset=latin1')).toBe('unsupported_media_type');
    expect(refusal('application/json; charset=latin1; charset=utf-8')).toBe('unsupported_media_type');
    expect(refusal('application/json; charset=utf-16')).toBe('unsupported_media_type');
  });

  it('refuses bytes that are not UTF-8 (Latin-1, overlong, CESU surrogates) with 400', () => {
    expect(utf8TextOf(Buffer.from('{"name":"José 患者"}'))).toBe('{"name":"José 患者"}');
    for (const bytes of [[0x4a, 0x6f, 0x73, 0xe9], [0xc0, 0x80], [0xed, 0xa0, 0x80]]) {
      expect(() => utf8TextOf(Buffer.from(bytes))).toThrow(/not valid UTF-8/);
    }
  });
});
