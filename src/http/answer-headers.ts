/**
 * Headers every answer carries, whoever writes it (the app's hook, or the socket writer for
 * requests that never became requests: plugins/client-errors.ts). Answers carry health data:
 * no cache on the way (a proxy, a browser) may keep them, and none may be read as anything but
 * the type they say (OWASP REST security headers).
 */
export const ANSWER_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } as const;
