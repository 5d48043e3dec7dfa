// A loopback server speaking the Anthropic Messages API (POST /v1/messages) that the real
// @anthropic-ai/sdk client talks to. Each test scripts the answers; the server records requests.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  headers: Record<string, string | string[] | undefined>;
  body: { model: string; system?: string; max_tokens: number; messages: { role: string; content: string }[] };
}

export type Script = (req: RecordedRequest) => {
  status?: number;
  text?: string;
  error?: { type: string; message: string };
};

export interface MessagesLoopback {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startMessagesLoopback(script: Script): Promise<MessagesLoopback> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/messages') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'Not found' } }));
        return;
      }
      const recorded = {
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'],
      };
      requests.push(recorded);
      const answer = script(recorded);
      if (answer.error) {
        res.writeHead(answer.status ?? 400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: answer.error }));
        return;
      }
      res.writeHead(answer.status ?? 200, {
        'content-type': 'application/json',
        'request-id': `req_${requests.length}`,
      });
      res.end(
        JSON.stringify({
          id: `msg_loopback_${requests.length}`,
          type: 'message',
          role: 'assistant',
          model: recorded.body.model,
          content: [{ type: 'text', text: answer.text ?? '' }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 10 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
