// Looks for secret values everywhere Kumoss writes: every workflow history of the namespace,
// every object in the artifact bucket — saved plans (zip archives) opened, every entry read —, and
// any text the caller collected (logs, API responses).
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Client, Connection } from '@temporalio/client';
import { unzipSync } from 'fflate';
import { ArtifactStore, createS3Client } from '../../shared/infra/object-store';
import type { TestStack } from './test-stack';

/** Every secret value a test makes up contains this, so the run's final scan can find any of them. */
export const SECRET_MARKER = 'KUMOSS-SECRET';

export interface Finding {
  secret: string;
  where: string;
}

const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

/** One object's bytes; a failure names the object the scan could not read. */
async function readObject(s3: S3Client, bucket: string, key: string): Promise<Buffer> {
  try {
    const body = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return Buffer.from((await body.Body?.transformToByteArray()) ?? []);
  } catch (err) {
    throw new Error(`the secret scan could not read object ${key}: ${String(err)}`);
  }
}

/** Every string of a history, payload bytes decoded as UTF-8. */
export function flattenText(value: unknown): string {
  const out: string[] = [];
  const seen = new Set<unknown>();
  const walk = (v: unknown): void => {
    if (v === null || v === undefined) return;
    if (typeof v === 'string') out.push(v);
    else if (v instanceof Uint8Array) out.push(Buffer.from(v).toString('utf8'));
    else if (typeof v === 'object' && !seen.has(v)) {
      seen.add(v);
      for (const x of Object.values(v as Record<string, unknown>)) walk(x);
    }
  };
  walk(value);
  return out.join('\n');
}

/** `secrets`: name → value. Also looks for each value's base64 (an HTTP Basic header carries it so). */
export async function scanForSecrets(
  stack: Pick<TestStack, 'temporalAddress' | 'namespace' | 's3Endpoint' | 'bucket'>,
  secrets: Record<string, string>,
  extra: Record<string, string> = {},
): Promise<{ findings: Finding[]; histories: number; objects: number; archives: number }> {
  const needles = Object.entries(secrets).flatMap(([name, value]): [string, string][] => [
    [name, value],
    [`${name} (base64)`, Buffer.from(value).toString('base64')],
    [`${name} (in x-access-token basic auth)`, Buffer.from(`x-access-token:${value}`).toString('base64')],
  ]);
  const findings: Finding[] = [];
  const look = (where: string, text: string) => {
    for (const [name, value] of needles)
      if (value && text.includes(value)) findings.push({ secret: name, where });
  };

  const connection = await Connection.connect({ address: stack.temporalAddress });
  const client = new Client({ connection, namespace: stack.namespace });
  let histories = 0;
  try {
    // The raw visibility API: client.workflow.list() would decode memos, and some are encrypted.
    let nextPageToken: Uint8Array | undefined;
    do {
      const page = await connection.workflowService.listWorkflowExecutions({
        namespace: stack.namespace,
        pageSize: 500,
        ...(nextPageToken ? { nextPageToken } : {}),
      });
      for (const wf of page.executions ?? []) {
        const id = wf.execution?.workflowId ?? '';
        const history = await client.workflow.getHandle(id, wf.execution?.runId ?? undefined).fetchHistory();
        look(`history of ${wf.type?.name ?? ''} ${id}`, flattenText(history));
        histories++;
      }
      nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
    } while (nextPageToken);
  } finally {
    await connection.close();
  }

  const s3 = createS3Client({ endpoint: stack.s3Endpoint, bucket: stack.bucket, region: 'us-east-1' });
  let objects = 0;
  let archives = 0;
  for (const key of await new ArtifactStore(s3, stack.bucket).list('')) {
    const bytes = await readObject(s3, stack.bucket, key);
    look(`object ${key}`, bytes.toString('utf8'));
    // A saved plan is a zip: its entries (the plan, the state snapshots, the configuration and
    // backend settings) are compressed, so they are read one by one.
    if (bytes.subarray(0, 4).equals(ZIP_MAGIC)) {
      for (const [entry, data] of Object.entries(unzipSync(bytes)))
        look(`object ${key} (zip entry ${entry})`, Buffer.from(data).toString('utf8'));
      archives++;
    }
    objects++;
  }

  for (const [where, text] of Object.entries(extra)) look(where, text);
  return { findings, histories, objects, archives };
}
