// A test stack in a process of its own (bench/): the worker being measured then shares its
// process with nothing but itself, as in production, where the metadata store, the object store
// and the git host are other programs. Prints the stack as one JSON line; stops on SIGTERM or
// when its parent closes stdin.
import { quietKnownWarnings } from '../../shared/infra/logger';
import { startTestStack } from './test-stack';

quietKnownWarnings();
const { stack, stop } = await startTestStack();
process.stdout.write(`${JSON.stringify(stack)}\n`);
let stopping = false;
const end = (): void => {
  if (stopping) return;
  stopping = true;
  void stop().then(() => process.exit(0));
};
process.once('SIGTERM', end);
process.once('SIGINT', end);
process.stdin.on('end', end);
process.stdin.resume();
