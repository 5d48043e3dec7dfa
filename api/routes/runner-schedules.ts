// A runner group's periodic drift detection over HTTP: its Temporal Schedule
// `runner-schedule:<group>` runs `runner.environment-drift-detect` on the group at an interval or
// on a cron expression — repairs applied only when `auto_apply` says so (off by default) — with
// pause and resume (with a note) and a run now. Devops change it, developers read it.
import { Router } from 'express';
import type { Client } from '@temporalio/client';
import type { Db } from '../../shared/infra/db';
import { getRunnerGroup, getRunnerSchedule, setRunnerSchedule } from '../../shared/infra/db/runners';
import { runnerScheduleSchema } from '../../shared/runner-contracts';
import { scheduleNoteSchema } from '../../shared/stack-contracts';
import { authenticate, currentUser, requireRole } from '../auth';
import { HttpError } from '../errors';
import { RunnerSchedules, scheduleUnavailable as unavailable } from '../schedules';
import { parseBody, uuidParam } from '../validation';

export function createRunnerSchedulesRouter(deps: { db: Db; client: Client; taskQueue: string }): Router {
  const router = Router();
  const auth = authenticate(deps.db);
  const schedules = new RunnerSchedules(deps.client, deps.taskQueue);
  const group = async (req: Parameters<typeof currentUser>[0]) => {
    const user = currentUser(req);
    const id = uuidParam(req.params.id, 'Runner group');
    const g = await getRunnerGroup(deps.db, user.organization_uuid, id);
    if (!g) throw new HttpError(404, 'not_found', `Runner group ${id} not found.`);
    return g;
  };
  const answer = async (org: string, groupUuid: string) => {
    const set = await getRunnerSchedule(deps.db, org, groupUuid);
    const state = await schedules.state(groupUuid);
    if (!set || !state) throw new HttpError(404, 'not_found', `Runner group ${groupUuid} has no schedule.`);
    return { runner_group_uuid: groupUuid, ...set, schedule_state: state };
  };

  router.put('/api/v1/runner-groups/:id/schedule', auth, requireRole('devops'), async (req, res) => {
    const g = await group(req);
    const user = currentUser(req);
    const s = parseBody(runnerScheduleSchema, req.body);
    await schedules.put(g, s, user.user_uuid).catch(unavailable);
    await setRunnerSchedule(deps.db, g.organization_uuid, g.runner_group_uuid, s);
    res.json(await answer(g.organization_uuid, g.runner_group_uuid));
  });

  router.get('/api/v1/runner-groups/:id/schedule', auth, requireRole('developer'), async (req, res) => {
    const g = await group(req);
    res.json(await answer(g.organization_uuid, g.runner_group_uuid));
  });

  router.delete('/api/v1/runner-groups/:id/schedule', auth, requireRole('devops'), async (req, res) => {
    const g = await group(req);
    await schedules.delete(g.runner_group_uuid).catch(unavailable);
    await setRunnerSchedule(deps.db, g.organization_uuid, g.runner_group_uuid, null);
    res.status(204).end();
  });

  for (const verb of ['pause', 'resume'] as const) {
    router.post(
      `/api/v1/runner-groups/:id/schedule/${verb}`,
      auth,
      requireRole('devops'),
      async (req, res) => {
        const g = await group(req);
        await answer(g.organization_uuid, g.runner_group_uuid);
        const { note } = parseBody(scheduleNoteSchema, req.body ?? {});
        await schedules[verb](g.runner_group_uuid, note).catch(unavailable);
        res.json(await answer(g.organization_uuid, g.runner_group_uuid));
      },
    );
  }

  router.post('/api/v1/runner-groups/:id/schedule/trigger', auth, requireRole('devops'), async (req, res) => {
    const g = await group(req);
    await answer(g.organization_uuid, g.runner_group_uuid);
    await schedules.trigger(g.runner_group_uuid).catch(unavailable);
    res.status(202).json(await answer(g.organization_uuid, g.runner_group_uuid));
  });

  return router;
}
