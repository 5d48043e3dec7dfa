// Every workflow id, schedule id and key Kumoss names, in one place. Sandbox-safe (workflows use
// them). Readable on purpose: an operator finds a run in the Web UI or with `temporal workflow
// describe` from what the API shows.

/** Artifact keys of a round: sessions/<session>/rounds/<round>/<name>. */
export function roundArtifactKey(sessionId: string, roundId: string, name: string): string {
  return `sessions/${sessionId}/rounds/${roundId}/${name}`;
}

/** Workflow id of a one-off drift detection (probe) on a repository. */
export function detectDriftWorkflowId(probeId: string): string {
  return `drift-detect:${probeId}`;
}

/** Workflow id of a generate round (a revert's too). */
export function generateRoundWorkflowId(sessionId: string, roundId: string): string {
  return `generate-round:${sessionId}:${roundId}`;
}

/** Workflow id of an apply round. */
export function applyRoundWorkflowId(sessionId: string, roundId: string): string {
  return `apply-round:${sessionId}:${roundId}`;
}

/** Workflow id of a drift round. */
export function driftRoundWorkflowId(sessionId: string, roundId: string): string {
  return `drift-round:${sessionId}:${roundId}`;
}

/** The session branch. */
export function sessionBranch(sessionId: string): string {
  return `kumoss/${sessionId}`;
}

/** Workflow id of a session. */
export function sessionWorkflowId(sessionId: string): string {
  return `session:${sessionId}`;
}

/** The Temporal Schedule of a stack. */
export const stackScheduleId = (stackUuid: string): string => `drift-schedule:${stackUuid}`;

/** The Temporal Schedule of a runner group. */
export const runnerScheduleId = (groupUuid: string): string => `runner-schedule:${groupUuid}`;

/** The id of a repair a detection chains (auto_apply): the group names its organization. */
export const runnerRepairWorkflowId = (groupUuid: string, id: string): string =>
  `runner-repair:${groupUuid}:${id}`;

/** The id a stack's schedule starts its runs under (Temporal appends each run's scheduled time). */
export const stackDetectionWorkflowId = (stackUuid: string): string => `drift-detection:${stackUuid}`;

/** The id a runner group's schedule starts its detections under (with the scheduled time appended). */
export const runnerDetectWorkflowId = (groupUuid: string): string => `runner-detect:${groupUuid}`;

/** A stack's event-driven detections: one workflow per stack gathers its audit events into runs. */
export const stackEventsWorkflowId = (stackUuid: string): string => `drift-events:${stackUuid}`;

/**
 * The task queue a stack detection's plan runs on, beside the worker's own: each worker polls it
 * for only as many detections as it runs at once, so a backlog of due stacks waits in the server's
 * queue (in order, costing nothing) rather than as activities started on a worker.
 */
export const detectionTaskQueue = (taskQueue: string): string => `${taskQueue}-detections`;
