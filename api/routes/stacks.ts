// Stacks over HTTP, always within the caller's organization: registered roots (devops change
// them, developers read them), each with its Temporal Schedule — pause and resume with a note,
// run now, backfill a missed window — its detection runs and the drift inbox (the webhooks that
// announce what the runs find: routes/webhooks.ts).
import { requireAuthorized } from '../authz';
import { requireAllowedTarget, requireConnectedRepository } from '../targets';
import { randomUUID } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import type { SessionOperation } from '../../shared/contracts';
import {
  createStack,
  deleteStack,
  getStack,
  linkItems,
  listDetectionRuns,
  listDriftItems,
  listStacks,
  updateStack,
} from '../../shared/infra/db/stacks';
import {
  backfillSchema,
  detectionRunListSchema,
  driftItemListSchema,
  driftItemQuerySchema,
  remediateItemsSchema,
  remediationRequest,
  revertRequest,
  scheduleNoteSchema,
  stackSpecSchema,
  stackAnswerSchema,
  stackTriggerAnswerSchema,
  stackListSchema,
  stackUpdateSchema,
  type Stack,
} from '../../shared/stack-contracts';
import { z } from 'zod';
import { operation, route } from '../contract';
import { authenticate, callerOrganization, currentUser, requireRole } from '../auth';
import { HttpError, registryError } from '../errors';
import {
  acceptedBody,
  newRoundId,
  openSession,
  type SessionRouteDeps,
  acceptedAnswer,
} from '../session-operations';
import { scheduleUnavailable as unavailable, StackSchedules } from '../schedules';
import { parseBody, uuidParam } from '../validation';

export type StacksDeps = SessionRouteDeps;

const stackId = { id: z.uuid().describe('The stack') };
const stackAnswer = (description: string) => ({ description, schema: stackAnswerSchema });
const sessionStarted = (description: string, extra: 'targets' | 'addresses') =>
  acceptedAnswer({ [extra]: z.array(z.string()) }, description);

/** The stack and inbox operations, each registered below from its declaration (api/contract.ts). */
export const stackOperations = {
  create: operation({
    method: 'post',
    path: '/api/v1/stacks',
    summary:
      'Register a stack (a Terraform root) and its drift schedule, created as the Temporal Schedule drift-schedule:<stack> (devops)',
    body: stackSpecSchema,
    responses: {
      201: { ...stackAnswer('Created, with schedule_state'), location: '/api/v1/stacks/:id' },
    },
    errors: [400, 401, 403, 409, 503],
  }),
  list: operation({
    method: 'get',
    path: '/api/v1/stacks',
    summary: 'Stacks of the organization, each with its schedule state and next runs',
    responses: { 200: { description: 'The stacks', schema: stackListSchema } },
    errors: [401],
  }),
  detail: operation({
    method: 'get',
    path: '/api/v1/stacks/:id',
    summary: 'A stack and its schedule state',
    params: stackId,
    responses: { 200: stackAnswer('The stack') },
    errors: [401, 404],
  }),
  update: operation({
    method: 'patch',
    path: '/api/v1/stacks/:id',
    summary: 'Change a stack; a new schedule applies to its Temporal Schedule (devops)',
    params: stackId,
    body: stackUpdateSchema,
    responses: { 200: stackAnswer('Updated') },
    errors: [400, 401, 403, 404, 503],
  }),
  remove: operation({
    method: 'delete',
    path: '/api/v1/stacks/:id',
    summary: 'Remove a stack, its schedule, runs and inbox items (devops)',
    params: stackId,
    responses: { 204: { description: 'Deleted' } },
    errors: [401, 403, 404, 503],
  }),
  pause: operation({
    method: 'post',
    path: '/api/v1/stacks/:id/pause',
    summary:
      "Pause the stack's schedule, with an optional note (devops); answers once Temporal reports it paused",
    params: stackId,
    body: scheduleNoteSchema,
    responses: { 200: stackAnswer('The stack, its schedule paused') },
    errors: [400, 401, 403, 404, 503],
  }),
  resume: operation({
    method: 'post',
    path: '/api/v1/stacks/:id/resume',
    summary:
      "Resume the stack's schedule, with an optional note (devops); answers once Temporal reports it running",
    params: stackId,
    body: scheduleNoteSchema,
    responses: { 200: stackAnswer('The stack, its schedule running') },
    errors: [400, 401, 403, 404, 503],
  }),
  trigger: operation({
    method: 'post',
    path: '/api/v1/stacks/:id/trigger',
    summary:
      'Run a detection now (devops); answers once the schedule has started the run, with its id — 409 while a run of the stack is going',
    params: stackId,
    responses: { 202: { description: 'Started: the stack and the run', schema: stackTriggerAnswerSchema } },
    errors: [401, 403, 404, 409, 503],
  }),
  backfill: operation({
    method: 'post',
    path: '/api/v1/stacks/:id/backfill',
    summary: 'Run the detections a missed window would have had (at most 7 days) (devops)',
    params: stackId,
    body: backfillSchema,
    responses: { 202: stackAnswer('Backfilled') },
    errors: [400, 401, 403, 404, 503],
  }),
  runs: operation({
    method: 'get',
    path: '/api/v1/stacks/:id/runs',
    summary: 'Detection runs of a stack, newest first',
    params: stackId,
    responses: { 200: { description: 'The runs', schema: detectionRunListSchema } },
    errors: [401, 404],
  }),
  items: operation({
    method: 'get',
    path: '/api/v1/drift-items',
    summary: 'The drift inbox: one item per stack, resource address and attribute path',
    query: driftItemQuerySchema,
    responses: { 200: { description: 'The items', schema: driftItemListSchema } },
    errors: [400, 401, 404],
  }),
  remediate: operation({
    method: 'post',
    path: '/api/v1/drift-items/remediate',
    summary:
      'Open a partial drift session on chosen open items of one stack: its targets are their addresses (never an apply) (devops)',
    body: remediateItemsSchema,
    responses: { 202: sessionStarted('Session started, with its targets', 'targets') },
    errors: [400, 401, 403, 404, 409, 503],
  }),
  revert: operation({
    method: 'post',
    path: '/api/v1/drift-items/revert',
    summary:
      'Open a session that reverts chosen open items of one stack in the cloud: its generate round pins a plan of the unchanged code targeted at their addresses; apply is a separate request (devops)',
    body: remediateItemsSchema,
    responses: { 202: sessionStarted('Session started, with the addresses it reverts', 'addresses') },
    errors: [400, 401, 403, 404, 409, 503],
  }),
};

export function createStacksRouter(deps: StacksDeps): Router {
  const router = Router();
  const auth = authenticate(deps.db);
  const schedules = new StackSchedules(deps.client, deps.taskQueue);
  const org = callerOrganization;
  const own = async (req: Parameters<typeof currentUser>[0]): Promise<Stack> =>
    getStack(deps.db, uuidParam(req.params.id, 'Stack'), org(req)).catch(registryError);
  const withSchedule = async (stack: Stack) => ({
    ...stack,
    schedule_state: await schedules.state(stack.stack_uuid),
  });

  route(router, stackOperations.create, auth, requireRole('devops'), async (req, res) => {
    const spec = parseBody(stackSpecSchema, req.body);
    await requireAllowedTarget(deps.targets, 'repository_url', spec.repository_url);
    await requireConnectedRepository(deps.db, org(req), 'repository_url', spec.repository_url);
    await requireAuthorized(deps.authz, req, 'stacks.create', {
      cloud: spec.cloud,
      repository_url: spec.repository_url,
      iac_path: spec.iac_path ?? '',
    });
    const stack = await createStack(deps.db, org(req), spec, currentUser(req).user_uuid).catch(registryError);
    try {
      await schedules.create(stack);
    } catch (err) {
      // No stack without its schedule: the row goes again.
      await deleteStack(deps.db, stack.organization_uuid, stack.stack_uuid);
      unavailable(err);
    }
    res
      .status(201)
      .location(`/api/v1/stacks/${stack.stack_uuid}`)
      .json(await withSchedule(stack));
  });

  route(router, stackOperations.list, auth, requireRole('developer'), async (req, res) => {
    const stacks = await listStacks(deps.db, org(req));
    res.json({ stacks: await Promise.all(stacks.map(withSchedule)) });
  });

  route(router, stackOperations.detail, auth, requireRole('developer'), async (req, res) => {
    res.json(await withSchedule(await own(req)));
  });

  route(router, stackOperations.update, auth, requireRole('devops'), async (req, res) => {
    const before = await own(req);
    const change = parseBody(stackUpdateSchema, req.body);
    // The stack as it is and as it would be: a change moves its schedule's work to the new target.
    await requireAuthorized(deps.authz, req, 'stacks.update', before);
    await requireAuthorized(deps.authz, req, 'stacks.update', {
      cloud: change.cloud ?? before.cloud,
      repository_url: change.repository_url ?? before.repository_url,
      iac_path: change.iac_path ?? before.iac_path,
    });
    if (change.repository_url) {
      await requireAllowedTarget(deps.targets, 'repository_url', change.repository_url);
      await requireConnectedRepository(
        deps.db,
        before.organization_uuid,
        'repository_url',
        change.repository_url,
      );
    }
    const after = await updateStack(deps.db, before.organization_uuid, before.stack_uuid, change).catch(
      registryError,
    );
    if (change.schedule) {
      try {
        await schedules.update(after);
      } catch (err) {
        await updateStack(deps.db, before.organization_uuid, before.stack_uuid, {
          schedule: before.schedule,
        });
        unavailable(err);
      }
    }
    res.json(await withSchedule(after));
  });

  route(router, stackOperations.remove, auth, requireRole('devops'), async (req, res) => {
    const stack = await own(req);
    await schedules.delete(stack.stack_uuid).catch(unavailable);
    await deleteStack(deps.db, stack.organization_uuid, stack.stack_uuid).catch(registryError);
    res.status(204).end();
  });

  for (const verb of ['pause', 'resume'] as const) {
    route(router, stackOperations[verb], auth, requireRole('devops'), async (req, res) => {
      const stack = await own(req);
      const { note } = parseBody(scheduleNoteSchema, req.body ?? {});
      await requireAuthorized(deps.authz, req, `stacks.${verb}`, stack);
      await schedules[verb](stack.stack_uuid, note).catch(unavailable);
      res.json(await withSchedule(stack));
    });
  }

  route(router, stackOperations.trigger, auth, requireRole('devops'), async (req, res) => {
    const stack = await own(req);
    await requireAuthorized(deps.authz, req, 'stacks.trigger', stack);
    const run_id = await schedules.trigger(stack.stack_uuid).catch(unavailable);
    res.status(202).json({ ...(await withSchedule(stack)), run_id });
  });

  route(router, stackOperations.backfill, auth, requireRole('devops'), async (req, res) => {
    const stack = await own(req);
    const b = parseBody(backfillSchema, req.body);
    await requireAuthorized(deps.authz, req, 'stacks.backfill', stack);
    await schedules.backfill(stack.stack_uuid, new Date(b.start), new Date(b.end)).catch(unavailable);
    res.status(202).json(await withSchedule(stack));
  });

  route(router, stackOperations.runs, auth, requireRole('developer'), async (req, res) => {
    const stack = await own(req);
    res.json({ runs: await listDetectionRuns(deps.db, stack.stack_uuid) });
  });

  route(router, stackOperations.items, auth, requireRole('developer'), async (req, res) => {
    const { stack, state, cloud } = parseBody(driftItemQuerySchema, { ...req.query });
    res.json({
      items: await listDriftItems(deps.db, org(req), {
        ...(stack ? { stack_uuid: stack } : {}),
        ...(state ? { state } : {}),
        ...(cloud ? { cloud } : {}),
      }),
    });
  });

  /** The caller's chosen open, non-whitelisted items of one stack, and that stack (4xx otherwise). */
  const chosenItems = async (req: Request, verb: string) => {
    const user = currentUser(req);
    const { item_uuids } = parseBody(remediateItemsSchema, req.body);
    const wanted = [...new Set(item_uuids)];
    const items = await listDriftItems(deps.db, user.organization_uuid, { ids: wanted });
    const missing = wanted.find((id) => !items.some((i) => i.drift_item_uuid === id));
    if (missing) throw new HttpError(404, 'not_found', `Drift item ${missing} not found.`);
    if (new Set(items.map((i) => i.stack_uuid)).size > 1)
      throw new HttpError(
        400,
        'invalid_request',
        'item_uuids: the items belong to more than one stack; open one session per stack.',
      );
    for (const i of items) {
      if (i.state !== 'open')
        throw new HttpError(
          409,
          'conflict',
          `Drift item ${i.drift_item_uuid} is resolved: nothing to ${verb}.`,
        );
      if (i.whitelisted)
        throw new HttpError(
          409,
          'conflict',
          `Drift item ${i.drift_item_uuid} is whitelisted by rule ${i.rule_id ?? '(unknown)'}: an exception, not drift to ${verb}.`,
        );
    }
    const stack = await getStack(deps.db, items[0]!.stack_uuid, user.organization_uuid).catch(registryError);
    await requireAuthorized(deps.authz, req, `drift_items.${verb}`, stack);
    return { user, items, stack };
  };

  /** A session on a stack's root, opened with its first operation; answered 202 like a first request. */
  const openStackSession = async (
    res: Response,
    chosen: Awaited<ReturnType<typeof chosenItems>>,
    op: Omit<SessionOperation, 'round_id' | 'actor_uuid'>,
    extra: Record<string, unknown>,
  ) => {
    const { user, items, stack } = chosen;
    const session_id = `s-${randomUUID()}`;
    const round_id = newRoundId();
    await openSession(
      deps,
      {
        session_id,
        organization_uuid: user.organization_uuid,
        created_by: user.user_uuid,
        repository_url: stack.repository_url,
        cloud: stack.cloud,
        scope_id: stack.scope_id,
        iac_path: stack.iac_path,
      },
      { ...op, round_id, actor_uuid: user.user_uuid },
      {
        request: {
          repository_url: stack.repository_url,
          cloud: stack.cloud,
          iac_path: stack.iac_path,
          created_by: user.name,
          stack: stack.name,
        },
      },
    );
    await linkItems(deps.db, stack.stack_uuid, items, session_id);
    res
      .status(202)
      .location(`/api/v1/sessions/${session_id}`)
      .json({ ...acceptedBody(session_id, round_id, { accepted: true }), ...extra });
  };

  // Adopt: a partial drift session on chosen open items of one stack — targets are their
  // addresses, the request says which attributes; the code follows the cloud.
  route(router, stackOperations.remediate, auth, requireRole('devops'), async (req, res) => {
    const chosen = await chosenItems(req, 'remediate');
    const { text, targets } = remediationRequest(chosen.stack.name, chosen.items);
    await openStackSession(res, chosen, { kind: 'partial', text, targets }, { targets });
  });

  // Revert: the cloud follows the code — a session whose generate round pins a plan of the
  // unchanged code targeted at exactly the items' addresses (audited, locked, applied on request).
  route(router, stackOperations.revert, auth, requireRole('devops'), async (req, res) => {
    const chosen = await chosenItems(req, 'revert');
    const { text, addresses } = revertRequest(chosen.stack.name, chosen.items);
    await openStackSession(res, chosen, { kind: 'generate', text, revert: addresses }, { addresses });
  });

  return router;
}
