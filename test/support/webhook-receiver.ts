// A loopback webhook receiver for the tests: it checks each delivery's signature with the secret
// the endpoint was given (401 when it does not verify), may refuse the first delivery of one event
// (503, to see the retry), and keeps every delivery it took.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SIGNATURE_HEADER, verifySignature } from '../../shared/infra/webhooks';

export interface Delivery {
  event: string;
  valid: boolean;
  body: { id: string; data: Record<string, unknown> };
}

export interface WebhookReceiver {
  url: string;
  /** The deliveries it took, in order. */
  received: Delivery[];
  /** The first delivery `match` accepts, once it has arrived. */
  delivery(match: (d: Delivery) => boolean): Promise<Delivery>;
  close(): void;
}

export async function startWebhookReceiver(opts: {
  /** The signing secret, once the endpoint has one. */
  secret: () => string;
  /** Refuse the first delivery of this event with a 503. */
  refuseOnce?: string;
}): Promise<WebhookReceiver> {
  const received: Delivery[] = [];
  const waiting: (() => void)[] = [];
  let refused = false;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const event = String(req.headers['kumoss-event']);
      const valid = verifySignature(opts.secret(), req.headers[SIGNATURE_HEADER] as string | undefined, raw);
      if (!valid) return void res.writeHead(401).end();
      if (event === opts.refuseOnce && !refused) {
        refused = true;
        return void res.writeHead(503).end();
      }
      received.push({ event, valid, body: JSON.parse(raw) as Delivery['body'] });
      for (const wake of waiting.splice(0)) wake();
      res.writeHead(200).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((r) => server.once('listening', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    async delivery(match) {
      for (;;) {
        const got = received.find(match);
        if (got) return got;
        await new Promise<void>((r) => waiting.push(r));
      }
    },
    close: () => server.close(),
  };
}
