// Apply survives its worker being killed with SIGKILL while `terraform apply` runs, without applying
// twice: the killed attempt recorded that it started before touching the state; the retry on a new
// worker reads the state's serial — unchanged: nothing reached the state, it applies; moved: the
// killed attempt applied, it does not apply again (the saved plan would be stale anyway) and plans
// once more to see that nothing is left. Either way the round completes and a fresh plan is clean.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeSecurityGroupsCommand } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EngineClient } from '../../activities/engine';
import type { ApplyRoundResult, GenerateRoundResult } from '../../shared/contracts';
import {
  applyRoundWorkflowId,
  generateRoundWorkflowId,
  roundArtifactKey,
  sessionBranch,
} from '../../shared/ids';
import { applyRound, generateRound } from '../../workflows';
import { awsClients, type AwsTestBed } from '../support/aws-test-bed';
import { workerProcess } from '../support/processes';
import {
  artifactStore,
  engineDeps,
  gitClient,
  stack,
  temporalHarness,
  type TemporalHarness,
  demoAwsBed,
} from '../support/stack';
import { needsBackgroundBuilds } from '../support/background-builds';

describe('apply survives its worker being killed during terraform apply (SIGKILL)', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let bed: AwsTestBed;
  const children: ChildProcess[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    h = await temporalHarness('apply-crash');
    bed = await demoAwsBed();
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await bed?.destroy();
    await h?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('completes once, with the change in the cloud and nothing left to plan', async () => {
    const queue = `apply-crash-${randomUUID().slice(0, 8)}`;
    const first = await workerProcess(queue);
    children.push(first);
    const session_id = `s-${randomUUID().slice(0, 8)}`;
    const common = {
      session_id,
      repository_url: bed.repoUrl,
      cloud: 'aws' as const,
      scope_id: 'scope-test',
      iac_path: bed.iacPath,
      heartbeat_timeout_seconds: 6,
    };
    const generated: GenerateRoundResult = await h.client.workflow.execute(generateRound, {
      taskQueue: queue,
      workflowId: generateRoundWorkflowId(session_id, 'r1'),
      args: [{ ...common, round_id: 'r1', text: 'Add tag Team=crash-proof to aws_security_group.web' }],
    });
    expect(generated.status).toBe('completed');
    const pinned = generated.pinned_plan;
    if (!pinned) throw new Error('no plan pinned');

    const handle = await h.client.workflow.start(applyRound, {
      taskQueue: queue,
      workflowId: applyRoundWorkflowId(session_id, 'r2'),
      args: [{ ...common, round_id: 'r2', pinned }],
    });
    // The apply has started: its record is written just before the engine touches the state.
    const started = roundArtifactKey(session_id, 'r2', 'apply/started.json');
    await vi.waitFor(() => artifactStore().getText(started), { timeout: 60_000, interval: 20 });
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    children.push(await workerProcess(queue));

    const result: ApplyRoundResult = await handle.result();
    expect(result.status).toBe('completed');
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1)).toBe(true);
    // Applied once: a second apply of the saved plan after the state moved would have been refused
    // as stale and failed the round.
    const log = await artifactStore().getText(result.log_key);
    expect(log).toMatch(
      /Apply complete! Resources: 0 added, 1 changed, 0 destroyed\.|An earlier attempt applied the plan/,
    );
    expect(result.state_serial).toBeGreaterThan(pinned.state_serial ?? 0);

    const out = await awsClients(stack().awsEndpoint).ec2.send(
      new DescribeSecurityGroupsCommand({ GroupIds: [bed.ids.get('aws_security_group.web') ?? ''] }),
    );
    expect(out.SecurityGroups?.[0]?.Tags).toContainEqual({ Key: 'Team', Value: 'crash-proof' });
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-apply-crash-'));
    dirs.push(dir);
    await gitClient().checkout({ url: bed.repoUrl, dir, branch: sessionBranch(session_id) });
    const engine = new EngineClient({
      ...engineDeps('terraform', stack().awsEndpoint),
      workdir: join(dir, bed.iacPath),
      scopeId: 'scope-test',
    });
    expect((await engine.plan({ out: join(dir, 'verify.tfplan') })).hasChanges).toBe(false);
  });
});
