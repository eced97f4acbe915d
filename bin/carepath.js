#!/usr/bin/env node
// Entry of the `carepath` command. The service is written in TypeScript and loaded through tsx,
// so `npx carepath …` works right after `npm ci` with no build step to remember (docs/decisions.md).
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
