// Structured logs (pino). Node-only: workflow code uses the workflow `log` instead.
import { pino } from 'pino';

export const logger = pino({
  level: process.env.KUMOSS_LOG_LEVEL ?? 'info',
  base: { service: 'kumoss' },
  // Secrets must never reach the logs, whatever object a caller passes.
  redact: {
    paths: ['*.token', '*.password', '*.apiKey', '*.authorization', 'GIT_TOKEN', 'ANTHROPIC_API_KEY', '*.GIT_TOKEN'],
    censor: '[redacted]',
  },
});
