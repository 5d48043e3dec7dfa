// runner.environment-drift-detect (seed 002): init → detect (seven detectors in parallel) → plan →
// finalize, producing a RunnerEnvironmentDriftPlan. Read-only unless auto_apply is true and drift
// was found: then it chains runner.environment-drift-repair and reports its run id.
import { ApplicationFailure } from '@temporalio/workflow';
import { ErrorTypes } from '../shared/errors';
import {
  DETECT_WORKFLOW_TYPE,
  detectInputSchema,
  type DetectInput,
  type RunnerDagState,
  type RunnerStartContext,
} from '../shared/runner-contracts';
import { DETECT_DAG } from '../shared/runner-dags';
import { initialState, runDag } from './runner-dag';

/** Splits the server-set context from the caller's input and validates the input. */
export function parseRunnerInput<T>(
  raw: unknown,
  parse: (
    input: unknown,
  ) =>
    | { success: true; data: T }
    | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } },
): { input: T; context: RunnerStartContext } {
  const { actor_uuid, retry_count, retried_from, ...rest } = (raw ?? {}) as Record<string, unknown> &
    RunnerStartContext;
  const parsed = parse(rest);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.map(String).join('.') || '(input)'}: ${i.message}`)
      .join('; ');
    throw ApplicationFailure.nonRetryable(`invalid input: ${problems}`, ErrorTypes.InvalidInput);
  }
  return {
    input: parsed.data,
    context: {
      ...(typeof actor_uuid === 'string' ? { actor_uuid } : {}),
      ...(typeof retry_count === 'number' ? { retry_count } : {}),
      ...(typeof retried_from === 'string' ? { retried_from } : {}),
    },
  };
}

export async function runnerEnvironmentDriftDetect(
  raw: DetectInput & RunnerStartContext,
): Promise<RunnerDagState> {
  const { input, context } = parseRunnerInput(raw, (v) => detectInputSchema.safeParse(v));
  return runDag(
    DETECT_DAG,
    initialState(DETECT_WORKFLOW_TYPE, { ...input, ...context, retry_count: context.retry_count ?? 0 }),
  );
}
