// Proof (b): objects in the real S3-compatible server; a presigned GET works, then expires.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { artifactStore } from '../support/stack';

describe('artifact store on the S3-compatible server', () => {
  it('lists every key under a prefix past a page of 1,000', async () => {
    const store = artifactStore();
    const prefix = `list-${randomUUID()}/`;
    const keys = Array.from({ length: 1003 }, (_, i) => `${prefix}${String(i).padStart(4, '0')}.txt`);
    for (let i = 0; i < keys.length; i += 50)
      await Promise.all(keys.slice(i, i + 50).map((k) => store.putText(k, 'x', 'text/plain')));
    expect(await store.list(prefix)).toEqual(keys);
  });

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
    // Five seconds: the signature's date has one-second resolution and a loaded machine may take
    // a while between signing and fetching.
    const url = await store.presignGet(key, 5);
    const fresh = await fetch(url);
    expect(fresh.status).toBe(200);
    expect(await fresh.text()).toContain('No changes.');
    // The URL names its own expiry: X-Amz-Date plus X-Amz-Expires seconds. Wait for that moment.
    const params = new URL(url).searchParams;
    const signed = params.get('X-Amz-Date') ?? '';
    const signedAt = Date.parse(
      `${signed.slice(0, 4)}-${signed.slice(4, 6)}-${signed.slice(6, 8)}T${signed.slice(9, 11)}:${signed.slice(11, 13)}:${signed.slice(13, 15)}Z`,
    );
    const expiresAt = signedAt + Number(params.get('X-Amz-Expires')) * 1000;
    expect(expiresAt - signedAt).toBe(5000);
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 1100));
    const expired = await fetch(url);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain('Request has expired');
  });
});
