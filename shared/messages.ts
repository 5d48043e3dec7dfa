// Update and query definitions shared by the workflows that handle them and the clients (API,
// scripts) that send them, as the Temporal samples keep them in `shared.ts`. Sandbox-safe: only
// the definitions and the contract types.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AuditSignal } from './audit-events';
import type { OperationAnswer, RoundProgress, SessionOperation, SessionState } from './contracts';
import type { RunnerDagState } from './runner-contracts';

/** The session workflow's type (`workflows/session.ts`), for clients that start it by name. */
export const SESSION_WORKFLOW_TYPE = 'session';

/** A drift round's progress (status, iteration, operations, groups). */
export const roundProgressQuery = defineQuery<RoundProgress>('progress');

/**
 * A session's next operation (a round, an apply, a pull request, a merge), as an Update whose id is
 * the round id: the validator refuses it at once, costing no history, while an operation is in
 * flight or once the session is finished (the failure's type is one of SessionRefusals).
 */
export const operationUpdate = defineUpdate<OperationAnswer, [SessionOperation]>('operation');

/** A session's state: settings, rounds, the operation in flight. */
export const sessionQuery = defineQuery<SessionState>('session');

/** A runner DAG run's state: every step's output and the bookkeeping fields. */
export const dagStateQuery = defineQuery<RunnerDagState>('state');

/** Audit events for a stack's event-driven detections (the `stackEvents` workflow). */
export const auditChangeSignal = defineSignal<[AuditSignal]>('auditChange');
