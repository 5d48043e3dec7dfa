// createApp(deps): the Express application without listen(), so tests mount it on their own socket.
import express, { type Express } from 'express';
import { errorHandler, notFound } from './errors';
import { createHealthRouter, type ComponentCheck } from './routes/health';

export interface AppDeps {
  checks: ComponentCheck[];
  log: (err: unknown) => void;
}

export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '1mb' }));
  app.use(createHealthRouter(deps.checks));
  app.use(notFound);
  app.use(errorHandler(deps.log));
  return app;
}
