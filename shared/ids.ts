// ID and key helpers. Sandbox-safe (workflows use them).

/** Artifact keys of a round: sessions/<session>/rounds/<round>/<name>. */
export function roundArtifactKey(sessionId: string, roundId: string, name: string): string {
  return `sessions/${sessionId}/rounds/${roundId}/${name}`;
}

/** Workflow id of a one-off drift detection (probe) on a repository. */
export function detectDriftWorkflowId(probeId: string): string {
  return `drift-detect:${probeId}`;
}

/** Workflow id of a drift round. */
export function generateRoundWorkflowId(sessionId: string, roundId: string): string {
  return `generate-round:${sessionId}:${roundId}`;
}

export function applyRoundWorkflowId(sessionId: string, roundId: string): string {
  return `apply-round:${sessionId}:${roundId}`;
}

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
