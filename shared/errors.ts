// Error types for ApplicationFailure.nonRetryable(message, type): permanent failures that a retry
// cannot fix. Sandbox-safe (imported by workflows).
export const ErrorTypes = {
  /** The IaC engine rejected the configuration (syntax error, invalid reference, …). */
  EngineConfiguration: 'EngineConfigurationError',
  /** The engine binary or provider mirror is missing or unusable. */
  EngineUnavailable: 'EngineUnavailableError',
  /** The repository, branch or IaC path does not exist. */
  RepositoryNotFound: 'RepositoryNotFoundError',
  /** A target (a repository's host) is, or resolves to, an address the configuration does not allow. */
  TargetRefused: 'TargetRefusedError',
  /** A push was rejected because the branch moved on the remote. */
  BranchMoved: 'BranchMovedError',
  /** Input that no retry will make valid. */
  InvalidInput: 'InvalidInputError',
  /** A registry record (runner group, cloud connection, plan) does not exist for this organization. */
  NotFound: 'NotFoundError',
  /** A cloud API refused a request (4xx): no retry will change its answer. */
  CloudRequestRejected: 'CloudRequestRejectedError',
  /** A forge (GitHub, …) refused a request (4xx): no retry will change its answer. */
  ForgeRequestRejected: 'ForgeRequestRejectedError',
  /** The model API refused a request (4xx other than rate limits): a retry gets the same answer. */
  ModelRequestRejected: 'ModelRequestRejectedError',
  /** A DAG step failed after its retries; the details carry the DAG state. */
  DagStepFailed: 'DagStepFailedError',
  /** The pinned plan no longer matches the branch or the state: apply refuses it, nothing applied. */
  StalePlan: 'StalePlan',
  /** The pinned plan has deny-level compliance findings and no admin override: apply refuses it. */
  ComplianceViolation: 'ComplianceViolation',
  /** The pinned plan's file does not match its SHA-256. */
  PlanTampered: 'PlanTampered',
  /** An earlier attempt applied part of the plan; what is left is not applied blind. */
  ApplyInterrupted: 'ApplyInterrupted',
  /** The engine's apply failed (its log travels in the failure's details). */
  ApplyFailed: 'ApplyFailed',
  /** The compliance policies do not evaluate. */
  CompliancePolicyError: 'CompliancePolicyError',
  /** A round's workflow failed (the innermost failure's message is its reason). */
  DriftRoundFailed: 'DriftRoundFailed',
  GenerateRoundFailed: 'GenerateRoundFailed',
  ApplyRoundFailed: 'ApplyRoundFailed',
} as const;

/** An apply that refused its plan: nothing was applied, and a new generate round can pin another. */
export const APPLY_REFUSALS: readonly string[] = [ErrorTypes.StalePlan, ErrorTypes.ComplianceViolation];

/**
 * The innermost failure of a cause chain (ChildWorkflowFailure → ApplicationFailure, ActivityFailure
 * → ApplicationFailure): its message says what went wrong, its type (an ApplicationFailure's) what
 * kind of failure it was. `depth` bounds how far down it looks (1: the direct cause only).
 */
export function innermostFailure(err: unknown, depth = Infinity): { message: string; type?: string } {
  let e: unknown = err;
  for (let d = 0; d < depth && e instanceof Error && e.cause instanceof Error; d++) e = e.cause;
  if (!(e instanceof Error)) return { message: String(err) };
  const type = (e as { type?: unknown }).type;
  return { message: e.message, ...(typeof type === 'string' && type ? { type } : {}) };
}

export type ErrorType = (typeof ErrorTypes)[keyof typeof ErrorTypes];
