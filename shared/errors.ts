// Error types for ApplicationFailure.nonRetryable(message, type): permanent failures that a retry
// cannot fix. Sandbox-safe (imported by workflows).
export const ErrorTypes = {
  /** The IaC engine rejected the configuration (syntax error, invalid reference, …). */
  EngineConfiguration: 'EngineConfigurationError',
  /** The engine binary or provider mirror is missing or unusable. */
  EngineUnavailable: 'EngineUnavailableError',
  /** The repository, branch or IaC path does not exist. */
  RepositoryNotFound: 'RepositoryNotFoundError',
  /** Input that no retry will make valid. */
  InvalidInput: 'InvalidInputError',
} as const;

export type ErrorType = (typeof ErrorTypes)[keyof typeof ErrorTypes];
