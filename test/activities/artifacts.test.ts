// Proof (b): objects in the real S3-compatible server; a presigned GET works, then expires.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { artifactStore } from '../support/stack';

describe('artifact store on the S3-compatible server', () => {
  it('stores and reads back an artifact under its deterministic key', async () => {
    const store = artifactStore();
    const key = `sessions/s-${randomUUID()}/rounds/r1/drift-report.json`;
    await store.putJson(key, { outcome: 'Succeeded' });
    expect(JSON.parse(await store.getText(key))).toEqual({ outcome: 'Succeeded' });
    // Writing the same key again overwrites: a retried activity leaves one object.
    await store.putJson(key, { outcome: 'Partial' });
    expect(await store.list(key)).toEqual([key]);
    expect(JSON.parse(await store.getText(key))).toEqual({ outcome: 'Partial' });
  });

  it('serves a presigned GET without credentials until it expires', async () => {
    const store = artifactStore();
    const key = `sessions/s-${randomUUID()}/rounds/r1/plan.txt`;
    await store.putText(key, 'No changes. Your infrastructure matches the configuration.');
    const url = await store.presignGet(key, 1);
    const fresh = await fetch(url);
    expect(fresh.status).toBe(200);
    expect(await fresh.text()).toContain('No changes.');
    await new Promise((r) => setTimeout(r, 2200));
    const expired = await fetch(url);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain('Request has expired');
  });
});
