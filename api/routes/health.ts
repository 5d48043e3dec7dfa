// GET /health: every component the API depends on, with its state. 200 when all are up, else 503.
import { Router } from 'express';
import { healthSchema } from '../../shared/contracts';
import { operation, route } from '../contract';

export interface ComponentCheck {
  name: string;
  check(): Promise<string>;
}

export interface ComponentStatus {
  name: string;
  ok: boolean;
  detail: string;
  latency_ms: number;
}

export async function runChecks(checks: ComponentCheck[], timeoutMs = 3000): Promise<ComponentStatus[]> {
  return Promise.all(
    checks.map(async (c) => {
      const t0 = Date.now();
      try {
        const detail = await Promise.race([
          c.check(),
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs),
          ),
        ]);
        return { name: c.name, ok: true, detail, latency_ms: Date.now() - t0 };
      } catch (err) {
        return { name: c.name, ok: false, detail: (err as Error).message, latency_ms: Date.now() - t0 };
      }
    }),
  );
}

export const healthOperations = {
  health: operation({
    method: 'get',
    path: '/health',
    summary: 'Component health: the metadata store, Temporal, the object store',
    public: true,
    responses: {
      200: { description: 'Every component up', schema: healthSchema },
      503: { description: 'A component is down', schema: healthSchema },
    },
    errors: [],
  }),
};

export function createHealthRouter(checks: ComponentCheck[]): Router {
  const router = Router();
  route(router, healthOperations.health, async (_req, res) => {
    const components = await runChecks(checks);
    const ok = components.every((c) => c.ok);
    res.status(ok ? 200 : 503).json({ status: ok ? 'ok' : 'degraded', components });
  });
  return router;
}
