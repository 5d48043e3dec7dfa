// POST /api/v1/drift/partial and /api/v1/drift/full: the first request of a session or a
// follow-up. Answers 202 with the session id before the round runs; the session workflow decides
// whether the round may start (one operation per session, none after a failure).
import { createHash, randomUUID } from 'node:crypto';
import { Router, type Request } from 'express';
import type { Client } from '@temporalio/client';
import {
  firstRequestSchema,
  followUpRequestSchema,
  type SessionOperation,
  type SessionState,
  type SessionSettings,
} from '../../shared/contracts';
import type { Db } from '../../shared/db';
import { sessionBranch, sessionWorkflowId } from '../../shared/ids';
import { KumossCloud, KumossSessionId } from '../../shared/search-attributes';
import { operationSignal, SESSION_WORKFLOW_TYPE, sessionQuery } from '../../shared/messages';
import { authenticate, currentUser, requireRole } from '../auth';
import { HttpError } from '../errors';
import { parseBody } from '../validation';

export interface SessionRouteDeps {
  db: Db;
  client: Client;
  taskQueue: string;
  orchestration: {
    max_drift_reports: number;
    drift_group_operations: number;
    activity_heartbeat_seconds?: number;
  };
}

/** Hash of repository URL, IaC path and scope id: the state project id when Kumoss manages state. */
export function stateProjectId(repositoryUrl: string, iacPath: string, scopeId: string): string {
  return createHash('sha256').update(`${repositoryUrl}\n${iacPath}\n${scopeId}`).digest('hex').slice(0, 32);
}

export const newRoundId = (): string => `r-${randomUUID().slice(0, 8)}`;

/** The session row of the caller's organization, or 404. */
export async function ownSession(deps: SessionRouteDeps, req: Request, sessionId: string) {
  const user = currentUser(req);
  const row = await deps.db
    .selectFrom('sessions')
    .selectAll()
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  if (!row || row.organization_uuid !== user.organization_uuid) {
    throw new HttpError(404, 'not_found', `Session ${sessionId} not found.`);
  }
  return row;
}

/** The session workflow's state, or a 503 when it cannot be read right now. */
export async function sessionState(deps: SessionRouteDeps, sessionId: string): Promise<SessionState> {
  try {
    return await deps.client.workflow.getHandle(sessionWorkflowId(sessionId)).query(sessionQuery);
  } catch (err) {
    throw new HttpError(
      503,
      'unavailable',
      `The session state cannot be read right now: ${(err as Error).message}`,
    );
  }
}

/** Hands an operation to an existing session (the workflow logs and drops what may not run). */
export async function submit(deps: SessionRouteDeps, sessionId: string, op: SessionOperation): Promise<void> {
  await deps.client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(operationSignal, op);
}

export function createDriftRouter(deps: SessionRouteDeps): Router {
  const router = Router();
  router.post('/api/v1/drift/:mode', authenticate(deps.db), requireRole('devops'), async (req, res) => {
    const mode = String(req.params.mode);
    if (mode !== 'partial' && mode !== 'full') {
      throw new HttpError(404, 'not_found', `No drift mode ${mode}: use partial or full.`);
    }
    const user = currentUser(req);
    const body: unknown = req.body;
    const followUp = typeof body === 'object' && body !== null && 'session_id' in body;
    const round_id = newRoundId();
    const op: SessionOperation = { round_id, kind: mode, actor_uuid: user.user_uuid };
    let session_id: string;
    if (followUp) {
      const r = parseBody(followUpRequestSchema, body);
      await ownSession(deps, req, r.session_id);
      session_id = r.session_id;
      await submit(deps, session_id, { ...op, text: r.text });
    } else {
      const r = parseBody(firstRequestSchema, body);
      session_id = `s-${randomUUID()}`;
      const iac_path = r.iac_path ?? '';
      const settings: SessionSettings = {
        session_id,
        organization_uuid: user.organization_uuid,
        repository_url: r.repository_url,
        cloud: r.cloud,
        scope_id: r.scope_id,
        iac_path,
        state_project_id: stateProjectId(r.repository_url, iac_path, r.scope_id),
        branch: sessionBranch(session_id),
        ...deps.orchestration,
      };
      await deps.db
        .insertInto('sessions')
        .values({
          session_id,
          organization_uuid: user.organization_uuid,
          created_by: user.user_uuid,
          repository_url: r.repository_url,
          cloud: r.cloud,
          scope_id: r.scope_id,
          iac_path,
          state_project_id: settings.state_project_id,
        })
        .execute();
      try {
        await deps.client.workflow.signalWithStart(SESSION_WORKFLOW_TYPE, {
          workflowId: sessionWorkflowId(session_id),
          taskQueue: deps.taskQueue,
          args: [{ settings }],
          signal: operationSignal,
          signalArgs: [{ ...op, text: r.text }],
          typedSearchAttributes: [
            { key: KumossSessionId, value: session_id },
            { key: KumossCloud, value: r.cloud },
          ],
          staticSummary: `Session on ${r.repository_url}${iac_path ? ` (${iac_path})` : ''}`,
          memo: {
            request: { repository_url: r.repository_url, cloud: r.cloud, iac_path, created_by: user.name },
          },
        });
      } catch (err) {
        // Nothing started: take the session row back so the request leaves no trace.
        await deps.db.deleteFrom('sessions').where('session_id', '=', session_id).execute();
        throw err;
      }
    }
    res.status(202).location(`/api/v1/sessions/${session_id}`).json({ session_id, round_id });
  });
  return router;
}
