// What the session routes share: the caller's session row, and handing an operation to the
// session workflow as an Update (update-with-start for a session's first request). A refused
// operation (one in flight, a finished session) is answered at once: the route still says 202, as
// the seed's contract has it, with `accepted: false` and the reason; the refusal is logged with the
// seed's exact line and written to the session's event log, and nothing else changes.
import type { AuthzConfig } from './authz';
import type { TargetPolicy } from '../shared/infra/network-targets';
import type { SecretBox } from '../shared/infra/secret-box';
import { randomUUID } from 'node:crypto';
import type { Request } from 'express';
import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import {
  SessionRefusals,
  sessionFinishedMessage,
  type SessionOperation,
  type SessionSettings,
} from '../shared/contracts';
import type { EventsHub } from './events-hub';
import type { Db } from '../shared/infra/db';
import { deleteSession, insertSession, recordEvents, sessionRow } from '../shared/infra/db/sessions';
import { sessionWorkflowId } from '../shared/ids';
import { logger } from '../shared/infra/logger';
import { operationUpdate, SESSION_WORKFLOW_TYPE } from '../shared/messages';
import { KumossCloud, KumossSessionId } from '../shared/search-attributes';
import type { z } from 'zod';
import { acceptedSchema } from '../shared/contracts';
import { currentUser } from './auth';
import type { ResponseContract } from './contract';
import { HttpError } from './errors';

export interface SessionRouteDeps {
  db: Db;
  client: Client;
  taskQueue: string;
  orchestration: {
    max_drift_reports: number;
    drift_group_operations: number;
    activity_heartbeat_seconds?: number;
    max_repair_cycles?: number;
    /** Four eyes: apply needs a second person's approval of the pinned plan. */
    apply_requires_approval?: boolean;
  };
  /** This process's LISTEN connection (api/events-hub.ts): streams wake, cached details drop. */
  hub?: EventsHub;
  /** services.authz: asked by every route that starts work (api/authz.ts). */
  authz?: AuthzConfig;
  /** Which private targets repository URLs and webhooks may name (api/targets.ts); absent: no check. */
  targets?: TargetPolicy;
  /** KUMOSS_SECRETS_KEY's box: git connections' credentials are sealed with it; absent: none stored. */
  secrets?: SecretBox;
  /** services.google_oidc.certs_url: Google's token-signing certificates (empty or absent: Google's). */
  googleCertsUrl?: string;
}

const log = logger.child({ component: 'api' });

export const newRoundId = (): string => `r-${randomUUID().slice(0, 8)}`;

/** The session row of the caller's organization, or 404. */
export async function ownSession(deps: Pick<SessionRouteDeps, 'db'>, req: Request, sessionId: string) {
  const user = currentUser(req);
  const row = await sessionRow(deps.db, sessionId);
  if (!row || row.organization_uuid !== user.organization_uuid) {
    throw new HttpError(404, 'not_found', `Session ${sessionId} not found.`);
  }
  return row;
}

/** What the session said to an operation. */
export type OperationOutcome = { accepted: true } | { accepted: false; refusal: string; reason: string };

const REFUSALS = new Set<string>(Object.values(SessionRefusals));

async function refused(
  deps: SessionRouteDeps,
  sessionId: string,
  op: SessionOperation,
  refusal: string,
  reason: string,
): Promise<OperationOutcome> {
  log.warn({ session_id: sessionId, round_id: op.round_id, kind: op.kind }, reason);
  await recordEvents(deps.db, sessionId, [
    {
      source_key: `refused:${op.round_id}`,
      round_id: op.round_id,
      type: 'refused',
      data: { round_id: op.round_id, kind: op.kind, refusal, reason },
    },
  ]);
  return { accepted: false, refusal, reason };
}

/** The session's answer to a refused Update, or undefined when the error is something else. */
function refusalOf(err: unknown): { refusal: string; reason: string } | undefined {
  if (err instanceof WorkflowUpdateFailedError) {
    const cause = err.cause;
    if (cause instanceof ApplicationFailure && cause.type && REFUSALS.has(cause.type)) {
      return { refusal: cause.type, reason: cause.message };
    }
  }
  return undefined;
}

/** Hands an operation to an existing session; a finished or busy session refuses it at once. */
export async function submitOperation(
  deps: SessionRouteDeps,
  row: { session_id: string; status: string },
  op: SessionOperation,
): Promise<OperationOutcome> {
  const sessionId = row.session_id;
  if (row.status !== 'ACTIVE') {
    return refused(deps, sessionId, op, SessionRefusals.Finished, sessionFinishedMessage(sessionId));
  }
  try {
    await deps.client.workflow
      .getHandle(sessionWorkflowId(sessionId))
      .executeUpdate(operationUpdate, { args: [op], updateId: op.round_id });
    return { accepted: true };
  } catch (err) {
    const no = refusalOf(err);
    if (no) return refused(deps, sessionId, op, no.refusal, no.reason);
    // The session's workflow completed (it ended a moment ago, or the row is behind): finished.
    if (err instanceof WorkflowNotFoundError) {
      return refused(deps, sessionId, op, SessionRefusals.Finished, sessionFinishedMessage(sessionId));
    }
    throw err;
  }
}

/** Starts a session with its first operation (update-with-start); a session id is used once. */
export async function startSession(
  deps: SessionRouteDeps,
  settings: SessionSettings,
  op: SessionOperation,
  memo: Record<string, unknown>,
): Promise<void> {
  const startWorkflowOperation = new WithStartWorkflowOperation(SESSION_WORKFLOW_TYPE, {
    workflowId: sessionWorkflowId(settings.session_id),
    taskQueue: deps.taskQueue,
    args: [{ settings }],
    workflowIdConflictPolicy: 'FAIL',
    // A finished session is never started again under its id.
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    typedSearchAttributes: [
      { key: KumossSessionId, value: settings.session_id },
      { key: KumossCloud, value: settings.cloud },
    ],
    staticSummary: `Session on ${settings.repository_url}${settings.iac_path ? ` (${settings.iac_path})` : ''}`,
    memo,
  });
  await deps.client.workflow.executeUpdateWithStart(operationUpdate, {
    args: [op],
    updateId: op.round_id,
    startWorkflowOperation,
  });
}

/**
 * A new session: its row, then its workflow with the first operation. When Temporal does not take
 * it, the row goes again, so the request leaves no trace.
 */
export async function openSession(
  deps: SessionRouteDeps,
  row: Parameters<typeof insertSession>[1],
  op: SessionOperation,
  memo: Record<string, unknown>,
): Promise<void> {
  const settings = await insertSession(deps.db, row, deps.orchestration);
  try {
    await startSession(deps, settings, op, memo);
  } catch (err) {
    await deleteSession(deps.db, row.session_id);
    throw err;
  }
}

/** The 202 of an IaC route as its operation declares it (api/contract.ts), with `extra` fields. */
export function acceptedAnswer(
  extra: z.ZodRawShape = {},
  description = 'Accepted: the session runs the operation in the background. `accepted` says whether it starts: false, with `refusal` and `reason`, when the session has an operation in flight or is finished.',
  where = '/api/v1/sessions/:id',
): ResponseContract {
  return { description, schema: acceptedSchema.extend(extra), location: where };
}

/** The 202 of an IaC route: the session, the round, and whether its run will start. */
export function acceptedBody(sessionId: string, roundId: string, outcome: OperationOutcome) {
  return {
    session_id: sessionId,
    round_id: roundId,
    accepted: outcome.accepted,
    ...(outcome.accepted ? {} : { refusal: outcome.refusal, reason: outcome.reason }),
  };
}
