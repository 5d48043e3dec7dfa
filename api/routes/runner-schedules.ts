// A runner group's periodic drift detection over HTTP: its Temporal Schedule
// `runner-schedule:<group>` runs `runner.environment-drift-detect` on the group at an interval or
// on a cron expression — repairs applied only when `auto_apply` says so (off by default) — with
// pause and resume (with a note) and a run now. Devops change it, developers read it.
import { requireAuthorized, runnerWorkTarget, type AuthzConfig } from '../authz';
import { Router } from 'express';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import { getRunnerGroup, getRunnerSchedule, setRunnerSchedule } from '../../shared/infra/db/runners';
import {
  runnerScheduleAnswerSchema,
  runnerScheduleTriggerAnswerSchema,
  runnerScheduleSchema,
  type RunnerScheduleAnswer,
  type RunnerGroup,
} from '../../shared/runner-contracts';
import { scheduleNoteSchema } from '../../shared/stack-contracts';
import { authenticate, currentUser, requireRole } from '../auth';
import { operation, route } from '../contract';
import { HttpError } from '../errors';
import { RunnerSchedules, scheduleUnavailable as unavailable } from '../schedules';
import { parseBody, uuidParam } from '../validation';

const groupId = { id: z.uuid().describe('The runner group') };
const scheduleAnswer = (description: string) => ({ description, schema: runnerScheduleAnswerSchema });
const noted = (verb: 'pause' | 'resume') =>
  operation({
    method: 'post',
    path: `/api/v1/runner-groups/:id/schedule/${verb}`,
    summary: `${verb === 'pause' ? 'Pause' : 'Resume'} the group’s schedule, with an optional note (devops)`,
    params: groupId,
    body: scheduleNoteSchema.optional(),
    responses: { 200: scheduleAnswer('The schedule') },
    errors: [400, 401, 403, 404, 503],
  });

/** A runner group's schedule operations, each registered below from its declaration (api/contract.ts). */
export const runnerScheduleOperations = {
  put: operation({
    method: 'put',
    path: '/api/v1/runner-groups/:id/schedule',
    summary:
      'Set a runner group’s periodic detection (its Temporal Schedule runner-schedule:<group>); auto_apply off by default (devops)',
    params: groupId,
    body: runnerScheduleSchema,
    responses: { 200: scheduleAnswer('The schedule and its state') },
    errors: [400, 401, 403, 404, 503],
  }),
  get: operation({
    method: 'get',
    path: '/api/v1/runner-groups/:id/schedule',
    summary: 'A runner group’s schedule, whether it applies, and its state (next runs, paused, note)',
    params: groupId,
    responses: { 200: scheduleAnswer('The schedule') },
    errors: [401, 404],
  }),
  delete: operation({
    method: 'delete',
    path: '/api/v1/runner-groups/:id/schedule',
    summary: 'Remove a runner group’s schedule (devops)',
    params: groupId,
    responses: { 204: { description: 'Removed' } },
    errors: [401, 403, 404, 503],
  }),
  pause: noted('pause'),
  resume: noted('resume'),
  trigger: operation({
    method: 'post',
    path: '/api/v1/runner-groups/:id/schedule/trigger',
    summary:
      'Run the group’s scheduled detection now (devops); answers once the schedule has started it, with its id — 409 while a detection of the group is going',
    params: groupId,
    responses: {
      202: {
        description: 'Started: the schedule and the detection',
        schema: runnerScheduleTriggerAnswerSchema,
      },
    },
    errors: [401, 403, 404, 409, 503],
  }),
};

export function createRunnerSchedulesRouter(deps: {
  db: Db;
  client: Client;
  taskQueue: string;
  authz?: AuthzConfig;
}): Router {
  const router = Router();
  const auth = authenticate(deps.db);
  const schedules = new RunnerSchedules(deps.client, deps.taskQueue);
  /** The caller's group, once the sidecar (if enabled) agrees to `operation` on it. */
  const group = async (req: Parameters<typeof currentUser>[0], operation?: string) => {
    const user = currentUser(req);
    const id = uuidParam(req.params.id, 'Runner group');
    const g = await getRunnerGroup(deps.db, user.organization_uuid, id);
    if (!g) throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    if (operation) await requireAuthorized(deps.authz, req, operation, runnerWorkTarget(g));
    return g;
  };
  const answer = async (g: RunnerGroup): Promise<RunnerScheduleAnswer> => {
    const set = await getRunnerSchedule(deps.db, g.organization_uuid, g.runner_group_uuid);
    const state = await schedules.state(g.runner_group_uuid);
    if (!set || !state)
      throw new HttpError(404, 'not_found', `Runner group ${g.runner_group_uuid} has no schedule.`);
    return {
      runner_group_uuid: g.runner_group_uuid,
      schedule: set.schedule,
      auto_apply: set.auto_apply,
      schedule_state: state,
    };
  };
  const ops = runnerScheduleOperations;

  route(router, ops.put, auth, requireRole('devops'), async (req, res) => {
    const g = await group(req, 'runner_schedule.put');
    const user = currentUser(req);
    const s = parseBody(runnerScheduleSchema, req.body);
    await schedules.put(g, s, user.user_uuid).catch(unavailable);
    await setRunnerSchedule(deps.db, g.organization_uuid, g.runner_group_uuid, s);
    res.json(await answer(g));
  });

  route(router, ops.get, auth, requireRole('developer'), async (req, res) => {
    const g = await group(req);
    res.json(await answer(g));
  });

  route(router, ops.delete, auth, requireRole('devops'), async (req, res) => {
    const g = await group(req, 'runner_schedule.delete');
    await schedules.delete(g.runner_group_uuid).catch(unavailable);
    await setRunnerSchedule(deps.db, g.organization_uuid, g.runner_group_uuid, null);
    res.status(204).end();
  });

  for (const verb of ['pause', 'resume'] as const) {
    route(router, ops[verb], auth, requireRole('devops'), async (req, res) => {
      const g = await group(req, `runner_schedule.${verb}`);
      await answer(g);
      const { note } = parseBody(scheduleNoteSchema, req.body ?? {});
      await schedules[verb](g.runner_group_uuid, note).catch(unavailable);
      res.json(await answer(g));
    });
  }

  route(router, ops.trigger, auth, requireRole('devops'), async (req, res) => {
    const g = await group(req, 'runner_schedule.trigger');
    await answer(g);
    const workflow_uuid = await schedules.trigger(g.runner_group_uuid).catch(unavailable);
    res.status(202).json({ ...(await answer(g)), workflow_uuid });
  });

  return router;
}
