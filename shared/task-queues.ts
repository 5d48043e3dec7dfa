// Task queue names. Sandbox-safe. The worker polls the configured queue (temporal.task_queue,
// default `kumoss`); tests give each file its own.
export const DEFAULT_TASK_QUEUE = 'kumoss';
