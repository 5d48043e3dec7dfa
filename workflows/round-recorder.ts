// A round's progress, shared by the drift, generate and apply rounds: its status and artifacts as
// events, answered to the progress query and written to the session store in order, batched while
// a write is under way. The writes are ordinary activities, not local ones: a workflow task that
// schedules a local activity completes only once it has answered, so each status written before a
// step would hold that step back by a store write; an ordinary activity runs beside it.
import { ApplicationFailure, proxyActivities, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { z } from 'zod';
import { ErrorTypes, innermostFailure } from '../shared/errors';
import { sessionBranch } from '../shared/ids';
import type { RoundRef } from '../shared/round-contracts';
import type { Activities } from '../activities';
import type { RoundEvent, RoundProgress, RoundStatus } from '../shared/contracts';
import { roundProgressQuery } from '../shared/messages';

const store = proxyActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export interface RoundRecorder {
  readonly progress: RoundProgress;
  status(s: RoundStatus, details?: string): void;
  artifact(key: string, type?: 'artifact' | 'report'): void;
  /** Resolves once every event recorded so far is in the store. */
  flushed(): Promise<void>;
}

export function roundRecorder(sessionId: string, roundId: string, maxIterations = 1): RoundRecorder {
  const progress: RoundProgress = {
    status: 'started',
    iteration: 0,
    max_iterations: maxIterations,
    operations: 0,
    groups: 0,
    artifacts: [],
    events: [],
  };
  setHandler(roundProgressQuery, () => progress);
  let unsent: RoundEvent[] = [];
  let written: Promise<void> = Promise.resolve();
  const record = (e: Omit<RoundEvent, 'seq' | 'at'>): void => {
    const full = { ...e, seq: progress.events.length + 1, at: new Date().toISOString() };
    progress.events.push(full);
    unsent.push(full);
    written = written.then(async () => {
      const events = unsent;
      unsent = [];
      if (events.length > 0) await store.recordRoundEvents({ sessionId, roundId, events });
    });
  };
  record({ type: 'status', status: 'started' });
  return {
    progress,
    status(s, details) {
      if (details) setCurrentDetails(details);
      if (progress.status === s) return;
      progress.status = s;
      record({ type: 'status', status: s, ...(progress.iteration ? { iteration: progress.iteration } : {}) });
    },
    artifact(key, type = 'artifact') {
      progress.artifacts.push(key);
      record({ type, key });
    },
    flushed: () => written,
  };
}

/**
 * A round's input, checked against its schema: a bad one fails the run, not its workflow task (a
 * task that fails is retried for ever).
 */
export function parseRoundInput<S extends z.ZodType>(schema: S, raw: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw ApplicationFailure.nonRetryable(
    `Invalid ${what} input: ${issue ? `${issue.path.join('.') || 'input'} ${issue.message}` : 'rejected'}`,
    ErrorTypes.InvalidInput,
  );
}

/** Why a round failed: its step's message (an activity's failure is the cause of Temporal's). */
export function roundFailureReason(err: unknown): string {
  return innermostFailure(err, 1).message;
}

/**
 * The log a failed step left (`details[0].log_key` of an ApplicationFailure anywhere in the cause
 * chain: a failed apply's), so the failed round still shows it.
 */
export function failureLogKey(err: unknown): string | undefined {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof ApplicationFailure) {
      const d = e.details?.[0] as { log_key?: unknown } | undefined;
      if (typeof d?.log_key === 'string') return d.log_key;
    }
  }
  return undefined;
}

/** Where a round's steps work: the session's repository, root, scope and branch. */
export function roundRefOf(input: {
  session_id: string;
  round_id: string;
  repository_url: string;
  iac_path: string;
  scope_id: string;
  state_project_id?: string | undefined;
  cloud: RoundRef['cloud'];
  branch?: string | undefined;
  base_branch?: string | undefined;
  engine?: 'terraform' | 'tofu' | undefined;
}): RoundRef {
  return {
    sessionId: input.session_id,
    roundId: input.round_id,
    repositoryUrl: input.repository_url,
    iacPath: input.iac_path,
    scopeId: input.scope_id,
    cloud: input.cloud,
    branch: input.branch ?? sessionBranch(input.session_id),
    ...(input.base_branch ? { baseBranch: input.base_branch } : {}),
    ...(input.engine ? { engine: input.engine } : {}),
    ...(input.state_project_id ? { stateProjectId: input.state_project_id } : {}),
  };
}
