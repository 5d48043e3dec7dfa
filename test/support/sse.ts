// Reading a session's server-sent events as a browser would: one fetch, the stream parsed into
// events until a condition or the server's close.
import { expect } from 'vitest';

export interface Received {
  id: string;
  event: string;
  data: Record<string, unknown>;
}

/** Reads an SSE stream until `stop` says so or the server closes it. */
export async function subscribe(
  url: string,
  token: string,
  opts: { lastEventId?: string; stop?: (e: Received) => boolean } = {},
): Promise<Received[]> {
  const res = await fetch(url, {
    headers: {
      authorization: `Bearer ${token}`,
      ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}),
    },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const out: Received[] = [];
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    buffer += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const fields = Object.fromEntries(
        block
          .split('\n')
          .filter((l) => !l.startsWith(':') && l.includes(': '))
          .map((l) => [l.slice(0, l.indexOf(': ')), l.slice(l.indexOf(': ') + 2)]),
      ) as Record<string, string>;
      if (!fields.event) continue;
      const e = {
        id: fields.id ?? '',
        event: fields.event,
        data: JSON.parse(fields.data ?? '{}') as Record<string, unknown>,
      };
      out.push(e);
      if (opts.stop?.(e)) {
        await reader.cancel();
        return out;
      }
    }
  }
}
