// A generate round with the Anthropic provider (the real SDK, a loopback Messages API) on the
// AWS-shaped bed: what the offline model declines — a new, versioned bucket — is written by the
// model; its first answer does not validate, so the engine's diagnostic goes back to it (a repair
// cycle) and the second answer's plan is pinned and passes the compliance audit.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AnthropicModel } from '../../activities/model/anthropic';
import type { GenerateRoundResult } from '../../shared/contracts';
import { generateRoundWorkflowId } from '../../shared/ids';
import { generateRound } from '../../workflows';
import {
  payload,
  startMessagesLoopback,
  type MessagesLoopback,
  type RecordedRequest,
} from '../support/anthropic-loopback';
import { postAccepted, roleTokens, startTestApi, waitForSession } from '../support/api';
import type { AwsTestBed } from '../support/aws-test-bed';
import { createDb, migrate } from '../../shared/infra/db';
import { demoAwsBed, stack, temporalHarness, testActivities, type TemporalHarness } from '../support/stack';
import { needsBackgroundBuilds } from '../support/background-builds';

const API_KEY = 'sk-ant-KUMOSS-SECRET-generate-0123456789';

const BUCKET_TYPO = `
resource "aws_s3_bucket" "logs" {
  bukket = "kumoss-access-logs"
}
`;
const BUCKET = `
resource "aws_s3_bucket" "logs" {
  bucket = "kumoss-access-logs"
  tags = {
    Name = "access-logs"
  }
}

resource "aws_s3_bucket_versioning" "logs" {
  bucket = aws_s3_bucket.logs.id
  versioning_configuration {
    status = "Enabled"
  }
}
`;

/** Accepts the request; writes the bucket with a typo first, then as the engine's diagnostic asks. */
function generateScript(req: RecordedRequest) {
  const system = req.body.system ?? '';
  if (system.includes('request filter'))
    return { text: '{"accepted": true, "reason": "It asks for a new bucket."}' };
  const p = payload(req);
  const files = p.files as { path: string; content: string }[];
  const main = files.find((f) => f.path === 'main.tf')?.content ?? '';
  const base = main.replace(BUCKET_TYPO, '');
  const content = `${base}${p.engine_diagnostic ? BUCKET : BUCKET_TYPO}`;
  return {
    text: JSON.stringify({
      edits: [{ path: 'main.tf', content }],
      summary: 'Added a versioned bucket for the access logs.',
    }),
  };
}

describe('generateRound with the Anthropic provider (loopback Messages API)', () => {
  needsBackgroundBuilds('provider-aws');
  let h: TemporalHarness;
  let api: MessagesLoopback;
  let bed: AwsTestBed;

  beforeAll(async () => {
    api = await startMessagesLoopback(generateScript);
    const model = new AnthropicModel({
      apiKey: API_KEY,
      baseURL: api.url,
      model: 'claude-test-large',
      smallModel: 'claude-test-small',
    });
    h = await temporalHarness('generate-anthropic', testActivities({ model }));
    bed = await demoAwsBed();
  });
  afterAll(async () => {
    await bed?.destroy();
    await h?.close();
    await api?.close();
  });

  /** A generate round of a new session asking for the bucket. */
  const bucketRound = (): Promise<GenerateRoundResult> => {
    const session_id = `s-${randomUUID().slice(0, 8)}`;
    return h.client.workflow.execute(generateRound, {
      taskQueue: h.taskQueue,
      workflowId: generateRoundWorkflowId(session_id, 'r1'),
      args: [
        {
          session_id,
          round_id: 'r1',
          repository_url: bed.repoUrl,
          cloud: 'aws',
          scope_id: 'scope-test',
          iac_path: bed.iacPath,
          text: 'Create a versioned S3 bucket for the access logs.',
        },
      ],
    });
  };

  it('repairs a change that does not validate with the engine diagnostic, then pins a plan that passes the audit', async () => {
    const result = await bucketRound();
    expect(result.status).toBe('completed');
    expect(result.repairs).toBe(1);
    expect(result.pinned_plan?.impact).toEqual(
      expect.objectContaining({ create: 2, update: 0, replace: 0, destroy: 0 }),
    );
    expect(result.pinned_plan?.compliance).toEqual(expect.objectContaining({ passed: true, deny: [] }));
    // Filter in generate mode, the first answer, the repair with the engine's own diagnostic.
    expect(api.requests).toHaveLength(3);
    expect(api.requests[0]?.body.system).toMatch(/in generate mode/);
    expect(payload(api.requests[1] as RecordedRequest).engine_diagnostic).toBeUndefined();
    expect(String(payload(api.requests[2] as RecordedRequest).engine_diagnostic)).toMatch(
      /Unsupported argument/,
    );
    for (const r of api.requests) expect(r.body.tool_choice).toEqual({ type: 'tool', name: 'answer' });
  });

  it('stops at orchestration.max_repair_cycles: a session started with none allowed reverts the invalid change and ends the round uncompleted', async () => {
    const db = createDb(stack().databaseUrl);
    await migrate(db);
    const tokens = await roleTokens(db, 'org-repairs');
    const http = await startTestApi(h, db, undefined, undefined, undefined, undefined, undefined, {
      orchestration: { max_repair_cycles: 0 },
    });
    try {
      const before = api.requests.length;
      const start = await postAccepted(http, tokens.devops, '/api/v1/generate', {
        repository_url: bed.repoUrl,
        cloud: 'aws',
        scope_id: 'scope-test',
        iac_path: bed.iacPath,
        text: 'Create a versioned S3 bucket for the access logs.',
      });
      const d = await waitForSession(http, tokens.developer, start.session_id, 1);
      expect(d.rounds[0]).toEqual(expect.objectContaining({ kind: 'generate', status: 'uncompleted' }));
      expect(d.rounds[0]?.reason).toMatch(
        /^The change did not validate after 0 repair cycle\(s\): terraform validate failed: Error: Unsupported argument \(main\.tf line \d+\); it was reverted\.$/,
      );
      expect(d.pinned_plan).toBeNull();
      // The filter and one answer: no repair request.
      expect(api.requests.length - before).toBe(2);
    } finally {
      http.close();
      await db.destroy();
    }
  });
});
