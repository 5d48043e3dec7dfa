// The Anthropic provider path end to end: a partial drift round whose model calls go through the
// real @anthropic-ai/sdk client to a loopback server speaking the Messages API.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorTypes } from '../../shared/errors';
import { AnthropicModel } from '../../activities/model/anthropic';
import { driftReportSchema } from '../../shared/drift-report';
import { driftRound } from '../../workflows';
import {
  driftScript as script,
  startMessagesLoopback,
  type MessagesLoopback,
} from '../support/anthropic-loopback';
import { DRIFT_ADDRESSES, type DriftTestBed } from '../support/drift-test-bed';
import {
  artifactStore,
  temporalHarness,
  testActivities,
  type TemporalHarness,
  newTestBed,
  roundInput,
} from '../support/stack';

// Test secrets carry KUMOSS-SECRET: the run's last step scans histories and artifacts for it.
const API_KEY = 'sk-ant-KUMOSS-SECRET-loopback-0123456789';

describe('driftRound with the Anthropic provider (loopback Messages API)', () => {
  let h: TemporalHarness;
  let b: DriftTestBed;
  let api: MessagesLoopback;

  beforeAll(async () => {
    api = await startMessagesLoopback(script);
    const model = new AnthropicModel({
      apiKey: API_KEY,
      baseURL: api.url,
      model: 'claude-test-large',
      smallModel: 'claude-test-small',
    });
    h = await temporalHarness('drift-round-anthropic', testActivities({ model }));
    b = await newTestBed();
  });
  afterAll(async () => {
    await b?.destroy();
    await h?.close();
    await api?.close();
  });

  it('runs filter, targeting, remediation and summary through the SDK and reconciles the resource', async () => {
    await b.inject('ingress');
    await b.inject('attribute');
    const workflowId = `anthropic-${randomUUID()}`;
    const result = await h.client.workflow.execute(driftRound, {
      taskQueue: h.taskQueue,
      workflowId,
      args: [
        roundInput(b.repoUrl, {
          mode: 'partial',
          text: 'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
        }),
      ],
    });
    expect(result.status).toBe('completed');
    expect(result.outcome).toBe('Succeeded');
    expect(result.targets).toEqual([DRIFT_ADDRESSES.ingress]);
    const report = driftReportSchema.parse(
      JSON.parse(await artifactStore().getText(result.report_key ?? '')),
    );
    expect(report.summary).toBe('Restored the code of sg-web-demo to match the console change.');
    expect(report.remediated_resources.map((r) => r.address)).toEqual([DRIFT_ADDRESSES.ingress]);

    // What went over the wire: the SDK's headers, the configured models, one call per step.
    const kinds = api.requests.map((r) => r.body.model);
    expect(kinds).toEqual([
      'claude-test-large',
      'claude-test-large',
      'claude-test-large',
      'claude-test-small',
    ]);
    for (const r of api.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(r.headers['anthropic-version']).toBeTruthy();
      // Every call requires the one answer tool, whose input schema is the answer's.
      expect(r.body.tool_choice).toEqual({ type: 'tool', name: 'answer' });
      expect(r.body.tools?.map((t) => t.name)).toEqual(['answer']);
      expect(r.body.tools?.[0]?.input_schema).toMatchObject({ type: 'object' });
    }
    const filterSchema = api.requests[0]?.body.tools?.[0]?.input_schema as {
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(Object.keys(filterSchema.properties).sort()).toEqual(['accepted', 'reason']);
    expect(filterSchema.required).toContain('accepted');
    // The key never reaches the workflow history.
    const history = await h.client.workflow
      .getHandle(`anthropic-${'x'}`)
      .describe()
      .catch(() => undefined);
    expect(history).toBeUndefined();
  });

  it('fails a call whose answer does not come through the answer tool, instead of guessing', async () => {
    const bad = await startMessagesLoopback(() => ({ text: 'I would rather not.' }));
    try {
      const model = new AnthropicModel({ apiKey: API_KEY, baseURL: bad.url, model: 'm', smallModel: 's' });
      await expect(model.filterRequest({ text: 'fix drift', prompt: '' })).rejects.toThrow(
        /without using the answer tool: I would rather not/,
      );
    } finally {
      await bad.close();
    }
  });

  it('surfaces a refusal from the service as final, after exactly one call (Temporal retries, never the SDK)', async () => {
    const failing = await startMessagesLoopback(() => ({
      status: 401,
      error: { type: 'authentication_error', message: 'invalid x-api-key' },
    }));
    try {
      const model = new AnthropicModel({
        apiKey: 'wrong',
        baseURL: failing.url,
        model: 'm',
        smallModel: 's',
      });
      const err = await model.filterRequest({ text: 'fix drift', prompt: '' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApplicationFailure);
      expect(err).toMatchObject({ nonRetryable: true, type: ErrorTypes.ModelRequestRejected });
      expect((err as Error).message).toMatch(/HTTP 401.*invalid x-api-key/);
      expect(failing.requests).toHaveLength(1);
    } finally {
      await failing.close();
    }
  });

  it("leaves an overloaded service to Temporal's retries: one call per attempt, retryable", async () => {
    const busy = await startMessagesLoopback(() => ({
      status: 529,
      error: { type: 'overloaded_error', message: 'Overloaded' },
    }));
    try {
      const model = new AnthropicModel({ apiKey: API_KEY, baseURL: busy.url, model: 'm', smallModel: 's' });
      const err = await model.filterRequest({ text: 'fix drift', prompt: '' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err instanceof ApplicationFailure && err.nonRetryable).toBe(false);
      expect(busy.requests).toHaveLength(1);
    } finally {
      await busy.close();
    }
  });
});
