// Engine faults: a wrapper around the real terraform makes every other `plan` fail the way a flaky
// backend does (state read reset by the peer). Rounds still succeed, through the activity retries
// with backoff, with the same report as an undisturbed round. (A permanent engine error — a syntax
// error in the root — ends the round `failed` after one attempt: drift-round-failure.test.ts.)
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DriftRoundResult } from '../../shared/contracts';
import { driftReportSchema } from '../../shared/drift-report';
import { driftRoundWorkflowId } from '../../shared/ids';
import { toolPath } from '../../shared/infra/tools.mjs';
import { driftRound } from '../../workflows';
import type { DriftTestBed } from '../support/drift-test-bed';
import { testSandbox } from '../support/test-stack';
import {
  artifactStore,
  newTestBed,
  roundInput,
  temporalHarness,
  testActivities,
  type TemporalHarness,
} from '../support/stack';

/** A wrapper that runs the real engine, except that odd-numbered `plan` calls fail transiently. */
function faultyEngine(dir: string): { path: string; injected: () => number } {
  const counter = join(dir, 'plan-calls');
  const injected = join(dir, 'injected');
  writeFileSync(counter, '0');
  writeFileSync(injected, '0');
  const path = join(dir, 'terraform-with-faults');
  writeFileSync(
    path,
    `#!/bin/sh
# Fault injection for the Kumoss tests: every odd plan fails like a flaky state backend.
if [ "$1" = "plan" ]; then
  n=$(($(cat '${counter}') + 1)); echo $n > '${counter}'
  if [ $((n % 2)) -eq 1 ]; then
    echo $(($(cat '${injected}') + 1)) > '${injected}'
    echo 'Error: Failed to load state: read tcp 127.0.0.1:51234->127.0.0.1:443: read: connection reset by peer' >&2
    exit 1
  fi
fi
exec '${toolPath('terraform')}' "$@"
`,
  );
  chmodSync(path, 0o755);
  return { path, injected: () => Number(readFileSync(injected, 'utf8').trim()) };
}

describe('drift rounds under engine faults', () => {
  let faulty: TemporalHarness;
  let steady: TemporalHarness;
  let engine: ReturnType<typeof faultyEngine>;
  const beds: DriftTestBed[] = [];

  beforeAll(async () => {
    engine = faultyEngine(mkdtempSync(join(tmpdir(), 'kumoss-faults-')));
    faulty = await temporalHarness(
      'engine-faults',
      testActivities({ engineBinary: engine.path, sandbox: testSandbox([dirname(engine.path)]) }),
    );
    steady = await temporalHarness('engine-steady', testActivities());
  });
  afterAll(async () => {
    await Promise.all(beds.map((b) => b.destroy()));
    await faulty?.close();
    await steady?.close();
  });

  const run = async (h: TemporalHarness) => {
    const b = await newTestBed();
    beds.push(b);
    await b.inject('ingress');
    await b.inject('attribute');
    const input = roundInput(b.repoUrl, { mode: 'full', text: 'Reconcile everything.' });
    const workflowId = driftRoundWorkflowId(input.session_id, input.round_id);
    const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    // History keeps an activity's last attempt only: one started at attempt 3 was retried twice.
    const retried = (history.events ?? []).reduce(
      (n, e) => n + Math.max(0, (e.activityTaskStartedEventAttributes?.attempt ?? 1) - 1),
      0,
    );
    return { result, report, retried };
  };

  it('a share of plan calls failing transiently: the round succeeds through retries with the same report', async () => {
    const [withFaults, undisturbed] = await Promise.all([run(faulty), run(steady)]);
    expect(engine.injected()).toBeGreaterThanOrEqual(1);
    expect(withFaults.retried).toBeGreaterThanOrEqual(engine.injected());
    expect(undisturbed.retried).toBe(0);
    expect(withFaults.result.status).toBe('completed');
    expect(withFaults.report.outcome).toBe(undisturbed.report.outcome);
    const addresses = (r: typeof withFaults.report) =>
      JSON.stringify(r.remediated_resources?.map((x) => x.address).sort());
    expect(addresses(withFaults.report)).toBe(addresses(undisturbed.report));
    expect(withFaults.report.outcome).toBe('Succeeded');
  });
});
