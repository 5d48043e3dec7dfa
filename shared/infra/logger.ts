// Structured logs (pino). Node-only: workflow code uses the workflow `log` instead.
import { pino } from 'pino';

export const logger = pino({
  level: process.env.KUMOSS_LOG_LEVEL ?? 'info',
  base: { service: 'kumoss' },
  // Secrets must never reach the logs, whatever object a caller passes.
  redact: {
    paths: [
      '*.token',
      '*.password',
      '*.apiKey',
      '*.authorization',
      'GIT_TOKEN',
      'ANTHROPIC_API_KEY',
      '*.GIT_TOKEN',
    ],
    censor: '[redacted]',
  },
});

/**
 * The AWS SDK warns at start-up that its 2027 releases will need Node 22; that is known (README,
 * engines) and says nothing about this run, so it is dropped. Every other warning still prints.
 */
export function quietKnownWarnings(): void {
  process.removeAllListeners('warning');
  process.on('warning', (w) => {
    if (w.name === 'NodeVersionSupportWarning' || w.message.startsWith('NodeVersionSupportWarning')) return;
    logger.warn({ warning: w.name }, w.message);
  });
}
