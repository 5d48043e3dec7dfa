// The session workflow's handlers on TestWorkflowEnvironment with stub activities (the fast tier:
// a local Temporal server from setup's own CLI, no engine, no store): apply without a pinned plan
// fails the session with the seed's message; a pull request on a session without changes is refused
// by the update's validator and nothing is recorded; a merge of a locked session fails its round and
// the session goes on; a failing drift round child fails the session.
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  NO_PINNED_PLAN,
  NOTHING_TO_PROPOSE,
  type PinnedPlan,
  type SessionSettings,
  type SessionState,
} from '../../shared/contracts';
import type { SessionRecord } from '../../shared/infra/db/sessions';
import { sessionWorkflowId } from '../../shared/ids';
import { testPinnedPlan } from '../support/pinned-plan';
import { operationUpdate, sessionQuery } from '../../shared/messages';
import { ensureSearchAttributes } from '../../shared/infra/temporal-setup';
import { toolPath, waitForTool } from '../../shared/infra/tools.mjs';
import { workflowsPath } from '../../worker/worker';

describe('session handlers (stub activities)', () => {
  let env: TestWorkflowEnvironment;
  let bundle: WorkflowBundleWithSourceMap;
  const recorded: SessionRecord[] = [];

  beforeAll(async () => {
    await waitForTool('temporal');
    [env, bundle] = await Promise.all([
      TestWorkflowEnvironment.createLocal({
        server: { executable: { type: 'existing-path', path: toolPath('temporal') } },
      }),
      bundleWorkflowCode({ workflowsPath }),
    ]);
    // The rounds' search attributes, as the worker registers them at start-up.
    await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
  }, 120_000);
  afterAll(async () => {
    await env?.teardown();
  });

  const settings = (): SessionSettings => {
    const id = `s-${randomUUID()}`;
    return {
      session_id: id,
      organization_uuid: randomUUID(),
      repository_url: 'https://git.example.com/infra.git',
      cloud: 'aws',
      scope_id: 'scope',
      iac_path: '',
      state_project_id: 'p',
      branch: `kumoss/${id}`,
      max_drift_reports: 3,
      drift_group_operations: 8,
    };
  };

  /** Runs `fn` with a worker whose activities are `stubs` (the store's write always a stub). */
  async function withWorker<T>(
    stubs: Record<string, (...a: never[]) => unknown>,
    fn: (tq: string) => Promise<T>,
  ) {
    const taskQueue = `session-${randomUUID()}`;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: bundle,
      activities: {
        recordSession: (rec: SessionRecord) => {
          recorded.push(rec);
          return Promise.resolve();
        },
        recordRoundEvents: () => Promise.resolve(),
        ...stubs,
      },
    });
    return worker.runUntil(fn(taskQueue));
  }

  /** Starts a session with its first operation; answers the update's outcome and the handle. */
  async function start(tq: string, s: SessionSettings, op: Record<string, unknown>) {
    const startOp = new WithStartWorkflowOperation('session', {
      workflowId: sessionWorkflowId(s.session_id),
      taskQueue: tq,
      args: [{ settings: s }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    const answer = await env.client.workflow
      .executeUpdateWithStart(operationUpdate, { args: [op as never], startWorkflowOperation: startOp })
      .catch((err: unknown) => err);
    return { answer, handle: await startOp.workflowHandle() };
  }
  const roundsOf = (sessionId: string) =>
    recorded.filter((r) => r.sessionId === sessionId).flatMap((r) => r.rounds ?? []);

  it('apply without a pinned plan fails the round and the session with the seed’s message', async () => {
    const s = settings();
    const state = await withWorker({}, async (tq) => {
      const { handle } = await start(tq, s, { round_id: 'r-1', kind: 'apply' });
      return (await handle.result()) as SessionState;
    });
    expect(state.status).toBe('FAILED');
    const last = roundsOf(s.session_id)
      .filter((r) => r.round_id === 'r-1')
      .at(-1);
    expect(last).toMatchObject({ kind: 'apply', status: 'failed', failure_reason: NO_PINNED_PLAN });
  });

  it('a pull request on a session without changes is refused before it starts, and nothing is recorded', async () => {
    const s = settings();
    const { answer } = await withWorker({}, (tq) => start(tq, s, { round_id: 'r-1', kind: 'pull_request' }));
    expect(answer).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(((answer as WorkflowUpdateFailedError).cause as Error).message).toBe(NOTHING_TO_PROPOSE);
    expect(roundsOf(s.session_id)).toEqual([]);
  });

  it('a merge of a locked session fails its round, and the session goes on', async () => {
    const s = settings();
    await withWorker(
      {
        sessionLock: () =>
          Promise.resolve({ locked: true, kind: 'plan', reason: 'A reviewed plan is pinned.' }),
      },
      async (tq) => {
        const { handle } = await start(tq, s, {
          round_id: 'r-1',
          kind: 'merge',
          pull_request: { provider: 'git_host', number: null },
        });
        await expect
          .poll(async () => (await handle.query(sessionQuery)).in_flight, { timeout: 30_000 })
          .toBeNull();
        expect((await handle.query(sessionQuery)).status).toBe('ACTIVE');
        await handle.terminate('test over');
      },
    );
    const last = roundsOf(s.session_id)
      .filter((r) => r.round_id === 'r-1')
      .at(-1);
    expect(last).toMatchObject({
      kind: 'merge',
      status: 'failed',
      failure_reason: `Session ${s.session_id} is locked: A reviewed plan is pinned.`,
    });
  });

  it('four eyes at apply: only an approval of the very plan pinned now, by someone else than its pinner, applies — whatever the API saw', async () => {
    const s = { ...settings(), apply_requires_approval: true };
    // Pinned by alice's generate round.
    const plan = (sha256: string): PinnedPlan => testPinnedPlan(s.session_id, sha256, { pinned_by: 'alice' });
    // The plan pinned now is B: a follow-up generate round pinned it after A was approved.
    const pinned = plan('b'.repeat(64));
    const applied: string[] = [];
    await withWorker(
      {
        applyPinnedPlan: (input: { pinned: PinnedPlan }) => {
          applied.push(input.pinned.sha256);
          return Promise.resolve({ summary: 'Applied.', logKey: 'log', stateSerial: 2 });
        },
      },
      async (tq) => {
        const handle = await env.client.workflow.start('session', {
          workflowId: sessionWorkflowId(s.session_id),
          taskQueue: tq,
          args: [
            {
              settings: s,
              state: {
                ...s,
                status: 'ACTIVE',
                pinned_plan: pinned.key,
                pinned,
                in_flight: null,
                round_count: 1,
                has_changes: true,
                pull_request: null,
              } satisfies SessionState,
            },
          ],
        });
        const attempt = async (round_id: string, approval?: { sha256: string; by: string }) => {
          await handle.executeUpdate(operationUpdate, {
            args: [{ round_id, kind: 'apply', actor_uuid: 'carol', ...(approval ? { approval } : {}) }],
          });
          await expect
            .poll(async () => (await handle.query(sessionQuery)).in_flight, { timeout: 30_000 })
            .toBeNull();
          return roundsOf(s.session_id)
            .filter((r) => r.round_id === round_id)
            .at(-1);
        };
        // Four clients fire at once as the API saw it: no approval, A's approval (the race), the
        // pinner's own approval of B; one after the other, as the session takes them.
        expect(await attempt('r-none')).toMatchObject({
          status: 'uncompleted',
          reason: expect.stringMatching(/needs a second devops or admin/) as unknown,
        });
        expect(await attempt('r-stale', { sha256: 'a'.repeat(64), by: 'bob' })).toMatchObject({
          status: 'uncompleted',
          reason: expect.stringMatching(/is not the plan that was approved/) as unknown,
        });
        expect(await attempt('r-own', { sha256: 'b'.repeat(64), by: 'alice' })).toMatchObject({
          status: 'uncompleted',
          reason: expect.stringMatching(/by the person who pinned the plan/) as unknown,
        });
        expect(applied).toEqual([]);
        expect((await handle.query(sessionQuery)).pinned?.sha256).toBe('b'.repeat(64));
        expect(await attempt('r-ok', { sha256: 'b'.repeat(64), by: 'bob' })).toMatchObject({
          status: 'completed',
        });
        expect(applied).toEqual(['b'.repeat(64)]);
        await handle.terminate('test over');
      },
    );
  });

  it('a drift round child that fails fails the session, with its innermost reason', async () => {
    const s = settings();
    const state = await withWorker(
      {
        prepareRound: () => {
          throw ApplicationFailure.nonRetryable(
            'Repository https://git.example.com/infra.git not found.',
            'RepositoryNotFoundError',
          );
        },
      },
      async (tq) => {
        const { handle } = await start(tq, s, {
          round_id: 'r-1',
          kind: 'full',
          text: 'Reconcile everything.',
        });
        return (await handle.result()) as SessionState;
      },
    );
    expect(state.status).toBe('FAILED');
    const last = roundsOf(s.session_id)
      .filter((r) => r.round_id === 'r-1')
      .at(-1);
    expect(last).toMatchObject({
      kind: 'full',
      status: 'failed',
      failure_reason: 'Drift round failed: Repository https://git.example.com/infra.git not found.',
    });
  });
});
