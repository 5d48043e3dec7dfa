// Error types for ApplicationFailure.nonRetryable(message, type): permanent failures that a retry
// cannot fix. Sandbox-safe (imported by workflows).
export const ErrorTypes = {
  /** The IaC engine rejected the configuration (syntax error, invalid reference, …). */
  EngineConfiguration: 'EngineConfigurationError',
  /** The engine binary or provider mirror is missing or unusable. */
  EngineUnavailable: 'EngineUnavailableError',
  /** The repository, branch or IaC path does not exist. */
  RepositoryNotFound: 'RepositoryNotFoundError',
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
} as const;

export type ErrorType = (typeof ErrorTypes)[keyof typeof ErrorTypes];
